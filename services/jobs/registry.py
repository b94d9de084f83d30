"""Every service's job functions, for the serving processes and ``plaudit worker``.

A service registers its jobs when its component is built, because a job runs on that
service's collaborators (the evaluation job measures the judge the component built). So the
registry of a process is the jobs of the components it builds, and a worker builds these.
"""

from __future__ import annotations

from services.core.components import Component
from services.core.jobs.context import JobRegistry
from services.core.resources import Resources
from services.jobs.app import component as jobs_component
from services.judge.app import component as judge_component
from services.karma.app import component as karma_component
from services.memory.app import component as memory_component
from services.rewards.app import component as rewards_component
from services.rubrics.synthesis.app import component as synthesis_component
from services.simulator.app import component as simulator_component


def job_components() -> list[Component]:
    """The components that register job functions: jobs.probe, judge.evaluation,
    karma.train, runs.rescore, memory.revise, rubrics.synthesize, simulator.calibrate."""
    return [
        jobs_component(),
        judge_component(),
        karma_component(),
        rewards_component(),
        memory_component(),
        synthesis_component(),
        simulator_component(),
    ]


def build_job_services(resources: Resources) -> JobRegistry:
    """Build every job component on ``resources``; returns the filled registry."""
    for component in job_components():
        resources.services.build(component, resources)
    return resources.job_registry
