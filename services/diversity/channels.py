"""The diversity service's reward channel: how far each completion lies from the group's."""

from __future__ import annotations

from pydantic import Field

from plaudit_wire.diversity import DiversityOptions, GroupCompletions, MetricName, ScalingName
from services.core.channels import Channel, ChannelOutcome, ChannelSpec, GroupInput
from services.core.validation import need_two
from services.diversity.service import DiversityService


class DiversitySpec(ChannelSpec):
    """Group diversity (``DiversityService.score_group``): value = the unweighted reward."""

    needs_group = True

    metric: MetricName = "centroid"
    scaling: ScalingName = "minmax"
    min_range: float = Field(default=1e-6, ge=0, le=2)


def diversity_channels(diversity: DiversityService) -> list[Channel]:
    """The ``diversity`` channel, run by ``diversity``."""

    async def run(spec: DiversitySpec, group: GroupInput) -> ChannelOutcome:
        need_two("diversity", group.completions)
        # The spec's options were validated with the rewards request; its weight is the
        # channel's (applied by the rewards total), so the value is the unweighted reward.
        options = DiversityOptions(
            metric=spec.metric, scaling=spec.scaling, min_range=spec.min_range
        )
        response = await diversity.score_completions(
            # completions already checked by the rewards request (unique ids, >= 2)
            GroupCompletions.model_construct(completions=list(group.completions)),
            options,
        )
        return ChannelOutcome(
            values=[r.reward for r in response.results],
            statuses=[r.status for r in response.results],
            meta={
                "embedder": response.embedder,
                "metric": response.metric,
                "scaling": response.scaling,
                "separable": response.separable,
                **({"note": response.note} if response.note else {}),
            },
            details=[{"distance": r.distance} for r in response.results],
        )

    return [Channel("diversity", DiversitySpec, run, "embedding dispersion within the group")]
