"""The experiment directory, and the one owner of it: its layout and atomic writes (``layout``), the
trials' checkpoints in storage (``checkpoints``), the last good copy of Tune's state (``last_good``),
when Tune saves that state (``state_saves``), and the driver's Tune callbacks that survive a resume (``callbacks``).
"""

from tune_service.experiment.layout import (
    SUMMARY_FILE,
    SWEEP_FILE,
    TRIAL_RESULTS_FILE,
    atomic_write,
    read_sweep_file,
    read_trial_results,
    trial_results_file,
    trial_results_files,
    write_sweep_file,
)

__all__ = [
    "SWEEP_FILE",
    "SUMMARY_FILE",
    "TRIAL_RESULTS_FILE",
    "atomic_write",
    "read_trial_results",
    "trial_results_file",
    "trial_results_files",
    "read_sweep_file",
    "write_sweep_file",
]
