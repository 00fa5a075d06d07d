"""The batch scheduler's actions, one module each: enqueue, allocate, backfill, preempt, reclaim.

Each is ``run(session)``, named in the conf's ``actions`` and run in that order. What two
of them share lives in the underscored modules: ``_interleave`` (walking queues and jobs
fairly) and ``_evict`` (making room for a task by evicting others).
"""
