"""Long work as jobs, with durable records in the database.

A job function is ``async def f(ctx: JobContext, params: dict) -> JSON`` registered by name
in a :class:`~services.core.jobs.context.JobRegistry`. Two runners execute the same functions
and write the same ``jobs`` records (:mod:`services.core.jobs.store`): the in-process runner of
the embedded default and arq on Redis, where ``plaudit worker`` processes run the jobs
(:mod:`services.core.jobs.queues`). Every process that holds jobs renews their lease; a
sweeper fails the jobs of dead processes and deletes expired records
(:mod:`services.core.jobs.sweeper`).
"""
