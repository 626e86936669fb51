"""The supervisor of one rank's program: a small process between the rank's Ray actor and the program.

Usage (by :class:`~tune_service.programs.rank.ProgramRank`, standard library only, run with ``python -I -S``)::

    python supervise.py EXIT_FILE GRACE_S END_FD -- PROGRAM ARGS...

Why it exists: when a trial's Ray actor goes, Ray kills the actor's direct child processes with SIGKILL,
which would end the program before its wandb run is flushed. So this process forks once and its first
process exits at once: the supervisor that goes on is no child of the actor, and it starts the program
as its own child. It reads ``END_FD``, the read end of a pipe whose write end only the actor holds: the
pipe's end of file (the actor closed it, or the actor is gone, whatever killed it) means "end the
program": SIGTERM (the hook makes a Python program exit cleanly), SIGKILL after ``GRACE_S`` seconds.
When the program has ended, by itself or so, its exit code (``Popen.returncode``: negative for a signal)
is written to ``EXIT_FILE`` and everything left in the process group (which the actor started in a
session of its own) is killed, this supervisor included.
"""

import os
import select
import signal
import subprocess
import sys

#: How often the supervisor looks whether the program has ended by itself.
POLL_S = 0.1


def end(program: subprocess.Popen, grace_s: float) -> int:
    """SIGTERM to the program, SIGKILL after ``grace_s`` seconds; its exit code."""
    program.send_signal(signal.SIGTERM)
    try:
        return program.wait(timeout=grace_s)
    except subprocess.TimeoutExpired:
        program.kill()
        return program.wait()


def supervise(exit_file: str, grace_s: float, end_fd: int, command: list[str]) -> None:
    if os.fork():
        os._exit(0)  # the actor reaps this first process; the supervisor goes on as no child of the actor's
    env = dict(os.environ, TUNE_SERVICE_PARENT_PID=str(os.getpid()))  # the hook watches its parent
    program = subprocess.Popen(command, env=env)
    code = None
    while code is None:
        readable, _, _ = select.select([end_fd], [], [], POLL_S)
        if readable and not os.read(end_fd, 1):  # end of file: the actor ended the program, or is gone
            code = end(program, grace_s)
        else:
            code = program.poll()
    written = f"{exit_file}.part"
    with open(written, "w", encoding="utf-8") as out:
        out.write(str(code))
    os.replace(written, exit_file)  # whole or absent: the actor never reads half a code
    os.killpg(os.getpgrp(), signal.SIGKILL)  # whatever the program left running, and this process


if __name__ == "__main__":
    exit_file, grace, fd, separator, *program_argv = sys.argv[1:]
    if separator != "--" or not program_argv:
        sys.exit("usage: supervise.py EXIT_FILE GRACE_S END_FD -- PROGRAM ARGS...")
    supervise(exit_file, float(grace), int(fd), program_argv)
