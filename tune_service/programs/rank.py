"""One rank of a W&B program's trial: a Ray actor, in its bundle of the trial's placement group (its
CPUs and GPUs), that starts the program with the environment ``torchrun`` gives a rank and ends it.

The program runs under a supervisor (:mod:`~tune_service.programs.supervise`), in a process group of its
own, so that ending it ends everything it started: ``SIGTERM`` first, ``SIGKILL`` after a grace period.
The supervisor does that when this actor closes its pipe to it, or when this actor is gone (killed with
its trial): so a stopped program's wandb run is finished however its trial's actors went. The program's
output goes to ``rank_<i>.log`` in the trial's directory (on the rank's node); the last lines are what a
failure says.
"""

from __future__ import annotations

import datetime
import json
import os
import signal
import subprocess
import sys
import time
from collections import deque
from pathlib import Path
from typing import Any

from tune_service.programs import rendezvous
from tune_service.ray_internals import set_tune_trial_environment

#: Where the import hook is (put first on the program's PYTHONPATH).
HOOK_DIR = Path(__file__).resolve().parent / "hook"
#: The supervisor script, run by path: standard library only.
SUPERVISOR = Path(__file__).resolve().parent / "supervise.py"
#: What a program's exit code is when its supervisor vanished without recording one (killed).
LOST = -int(signal.SIGKILL)
#: Lines of a failed program's output that its trial's error quotes.
ERROR_LINES = 5


class ProgramRank:
    """Rank ``rank`` of ``world_size``: :meth:`start` the program, :meth:`poll` it, :meth:`end` it. A
    stopped program gets ``grace_s`` seconds between SIGTERM and SIGKILL."""

    def __init__(self, rank: int, world_size: int, grace_s: float):
        set_tune_trial_environment()  # the program inherits it, as Tune's runtime env would give it
        self.rank, self.world_size, self.grace_s = rank, world_size, grace_s
        self.group: int | None = None  # the program's process group (its supervisor's)
        self.end_fd: int | None = None  # closing it tells the supervisor to end the program
        self.exit_path: Path | None = None
        self.error_path: Path | None = None
        self.log_path: Path | None = None
        self.reports_path: Path | None = None
        self._report_lines: list[str] = []  # rank 0's complete report lines so far
        self._reports_offset = 0  # the bytes of the reports file they came from
        self._store: Any = None  # rank 0's: the program's process-group store, served while this actor lives

    def address(self) -> tuple[str, int]:
        """Where the other ranks find rank 0 (MASTER_ADDR/PORT): the process-group store this actor serves
        for the program, on this node's address only (:mod:`~tune_service.programs.rendezvous`). With one
        rank none is served (a program seldom makes a process group of one, and serving one costs this
        actor torch's import): a free port is named, and such a program's own store listens as torch's does."""
        listener = rendezvous.listen()
        host, port = rendezvous.address_of(listener)
        if self.world_size == 1:
            listener.close()
        else:
            # Without a world size the store does not wait for its members; the timeout bounds only what
            # this actor would ask of the store itself, which is nothing: any long one does.
            self._store = rendezvous.serve(listener, datetime.timedelta(minutes=30))
        return host, port

    def node(self) -> str:
        """The id of this rank's node (ranks on one node share LOCAL_WORLD_SIZE)."""
        import ray

        return ray.get_runtime_context().get_node_id()

    def start(
        self,
        argv: list[str],
        cwd: str | None,
        hook: str,
        files: dict[str, str],
        work_dir: str,
        master: tuple[str, int],
        local_rank: int,
        local_world_size: int,
    ) -> None:
        """Start the program: ``argv`` run in ``cwd`` (None: this actor's working directory, a job's
        working_dir on a cluster), with the torchrun environment and the hook. Written into ``work_dir``
        on this rank's node first: ``hook`` (what the hook gives this rank's ``wandb.init``) as
        ``trial_<rank>.json``, and ``files`` (name: text; what ``${args_json_file}`` names)."""
        import ray

        work = Path(work_dir)
        work.mkdir(parents=True, exist_ok=True)
        for name, text in files.items():
            (work / name).write_text(text, encoding="utf-8")
        cwd = cwd or os.getcwd()
        trial_file = work / f"trial_{self.rank}.json"  # ranks on one node share work_dir
        trial_file.write_text(hook, encoding="utf-8")
        self.log_path = work / f"rank_{self.rank}.log"
        env = dict(os.environ)
        # A wandb service of another process (the driver's, which an embedded Ray's processes inherit): the
        # program's runs would live in it, and an ended program's run would be flushed only when that
        # process ends. The program starts its own, which ends, and flushes, with the program.
        env.pop("WANDB_SERVICE", None)
        env.update(
            {
                "RANK": str(self.rank),
                "WORLD_SIZE": str(self.world_size),
                "LOCAL_RANK": str(local_rank),
                "LOCAL_WORLD_SIZE": str(local_world_size),
                "GROUP_RANK": "0",
                "MASTER_ADDR": master[0],
                "MASTER_PORT": str(master[1]),
                **(rendezvous.AGENT_STORE_ENVIRONMENT if self.world_size > 1 else {}),
                **rendezvous.gloo_interface(ray.util.get_node_ip_address()),
                "PYTHONPATH": os.pathsep.join([str(HOOK_DIR), cwd, *filter(None, [env.get("PYTHONPATH")])]),
                # ${interpreter} is `python`, found on the PATH: this interpreter, with wandb and torch.
                "PATH": os.pathsep.join([os.path.dirname(sys.executable), env.get("PATH", "")]),
                "TUNE_SERVICE_TRIAL": str(trial_file),
                # As W&B's agent marks the sweep's run: the hook makes an init in a process with it the trial's
                # run, and one in a process that removed it (W&B's cross-validation example) a run of its own.
                "WANDB_RUN_ID": str((json.loads(hook).get("run") or {}).get("id") or ""),
                "OMP_NUM_THREADS": env.get("OMP_NUM_THREADS", str(max(1, int(_cpus())))),
            }
        )
        gpus = ray.get_gpu_ids()
        if gpus:
            env["CUDA_VISIBLE_DEVICES"] = ",".join(str(g) for g in gpus)
        if self.rank == 0:
            self.reports_path = work / "reports.jsonl"
            self.reports_path.touch()
            env["TUNE_SERVICE_REPORTS"] = str(self.reports_path)
        self.exit_path = work / f"rank_{self.rank}.exit"
        self.error_path = work / f"rank_{self.rank}.error"
        env["TUNE_SERVICE_ERROR"] = str(self.error_path)
        for earlier in (self.exit_path, self.error_path):  # a rerun trial's directory may hold an earlier attempt's
            earlier.unlink(missing_ok=True)
        read_fd, self.end_fd = os.pipe()
        supervisor = [
            sys.executable,
            "-I",
            "-S",
            str(SUPERVISOR),
            str(self.exit_path),
            str(self.grace_s),
            str(read_fd),
            "--",
            *argv,
        ]
        with open(self.log_path, "ab") as log:
            first = subprocess.Popen(
                supervisor,
                cwd=cwd,
                env=env,
                stdout=log,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                start_new_session=True,
                pass_fds=(read_fd,),
            )
        os.close(read_fd)
        first.wait()  # it forks the supervisor and exits at once
        self.group = first.pid

    def poll(self, reports_read: int) -> tuple[list[str], int | None, str | None]:
        """The report lines after the first ``reports_read`` (rank 0; none elsewhere), the program's exit
        code (None while it runs), and the uncaught exception it raised, if any (its last line: the
        program may raise and still not exit). Lines are read only once complete."""
        code = self._exit_code()
        lines: list[str] = []
        if self.reports_path is not None:
            with open(self.reports_path, "rb") as reports:  # only what was written since the last look
                reports.seek(self._reports_offset)
                written = reports.read()
            complete = written.rfind(b"\n") + 1
            self._report_lines += written[:complete].decode("utf-8", errors="replace").splitlines()
            self._reports_offset += complete
            lines = self._report_lines[reports_read:]
        raised = None
        if self.error_path is not None and self.error_path.is_file():
            raised = self.error_path.read_text(encoding="utf-8", errors="replace").strip() or None
        return lines, code, raised

    def output_tail(self, lines: int = ERROR_LINES) -> str:
        """The last lines of the program's own output, wandb's console lines (``wandb: ...``: where its
        run is saved, how to sync it) left out; all of it is ``rank_<i>.log`` in the trial's ``program``
        directory."""
        if self.log_path is None or not self.log_path.is_file():
            return ""
        with open(self.log_path, encoding="utf-8", errors="replace") as log:
            own = (line.rstrip() for line in log if not line.startswith("wandb:"))
            return "\n".join(deque(own, maxlen=lines))

    def end(self) -> int | None:
        """End the program and everything it started, and return its exit code (None if it never
        started): the supervisor sends SIGTERM to the program alone (the hook makes it exit cleanly, so
        its wandb run is finished by wandb's service process, which a signal to the group would end
        first), SIGKILL after the grace period, then kills what is left in the group."""
        if self.group is None:
            return None
        if self.end_fd is not None:
            os.close(self.end_fd)
            self.end_fd = None
        deadline = time.monotonic() + self.grace_s + 5.0  # the supervisor's own SIGKILL comes at grace_s
        while (code := self._exit_code()) is None and time.monotonic() < deadline:
            time.sleep(0.05)
        _kill_group(self.group)  # nothing is left behind, whatever happened to the supervisor
        return code if code is not None else LOST

    def _exit_code(self) -> int | None:
        """The program's exit code once its supervisor has recorded it; LOST if the supervisor and
        everything in its group are gone without one; None while it runs."""
        if self.exit_path is None:
            return None
        recorded = _recorded_code(self.exit_path)
        if recorded is not None:
            return recorded
        assert self.group is not None  # start set it with exit_path
        try:
            os.killpg(self.group, 0)
        except ProcessLookupError:  # the group is empty: the supervisor ended, having recorded one or not
            recorded = _recorded_code(self.exit_path)  # it may have written it since the first look
            return LOST if recorded is None else recorded
        return None


def _recorded_code(exit_path: Path) -> int | None:
    try:
        return int(exit_path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return None


def _kill_group(group: int) -> None:
    try:
        os.killpg(group, signal.SIGKILL)
    except ProcessLookupError:
        pass


def _cpus() -> float:
    import ray

    return float(ray.get_runtime_context().get_assigned_resources().get("CPU", 1) or 1)
