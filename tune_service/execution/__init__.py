"""How trials run on ranks: warm gangs of DDP ranks that successive trials lease.

- :mod:`~tune_service.execution.rank`: one rank of a gang (a Ray actor): its process group, the trial it
  runs with the shared loop, and what it resets between trials.
- :mod:`~tune_service.execution.gang`: the N ranks of one DDP world, built in the trial's placement
  group, leased by successive trials of one concurrency slot, rebuilt when broken or worn.
- :mod:`~tune_service.execution.warm_trial`: the Tune trainable that runs a trial on a leased gang.
- :mod:`~tune_service.execution.checkpoints`: where a warm trial's checkpoints are in the experiment's
  storage, and the report that came with the newest.
"""
