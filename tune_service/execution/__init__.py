"""Running a sweep: the plan, the driver, and the trials on their ranks.

- :mod:`~tune_service.execution.plan`: a spec resolved before Ray starts (searcher, trial count, task,
  schedule); ``SweepPlan.on(cluster)`` adds the capacity check and the concurrency.
- :mod:`~tune_service.execution.driver`: ``run`` and ``resume``: Ray, the Tuner, the results.
- :mod:`~tune_service.execution.connect`: connecting to a Ray cluster, or starting the embedded one.
- :mod:`~tune_service.execution.resources`: what the cluster has and what one trial needs.
- :mod:`~tune_service.execution.warm_trial`: the Tune trainable that runs a trial on a leased gang.
- :mod:`~tune_service.execution.gang`: the N ranks of one DDP world, built in the trial's placement
  group, leased by successive trials of one concurrency slot, rebuilt when broken or worn.
- :mod:`~tune_service.execution.rank`: one rank of a gang (a Ray actor): its process group, the trial it
  runs with the shared loop, and what it resets between trials (:mod:`~tune_service.execution.process_state`).
- :mod:`~tune_service.execution.trial_actors`: warm and program trials' Tune actors on the workers Ray
  keeps ready (Tune's own runtime environment for them set aside).
- :mod:`~tune_service.execution.startup`: the driver's and a rank's start-up imports with Python's
  garbage collector paused.
- :mod:`~tune_service.execution.fresh_trial`: a trial as its own Ray Train run (plain
  ``train_loop_per_worker`` loops, and ``execution.gangs: fresh``).
"""
