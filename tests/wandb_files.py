"""Read wandb's offline run files (``offline-run-*/run-ID.wandb``) back, as ``wandb sync`` would.

wandb 0.31 ships no Python reader for them. The file is a LevelDB-style log: a 7-byte header (``:W&B``,
magic 0xBEE1, version 0), then 32 KiB blocks of records, each with a 7-byte header (crc32, length, type:
1 full, 2 first, 3 middle, 4 last), whose payloads are ``wandb_internal_pb2.Record`` protobufs.
"""

from __future__ import annotations

import json
import struct
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterator

from wandb.proto import wandb_internal_pb2

BLOCK = 32768
HEADER = 7
FULL, FIRST, MIDDLE, LAST = 1, 2, 3, 4


def records(path: Path) -> Iterator[Any]:
    """Every record of a ``.wandb`` file, in order (checksums are not verified)."""
    data = path.read_bytes()
    ident, magic, version = struct.unpack("<4sHB", data[:HEADER])
    assert (ident, magic, version) == (b":W&B", 0xBEE1, 0), f"not a wandb run file: {path}"
    position, pending = HEADER, b""
    while position + HEADER <= len(data):
        left = BLOCK - position % BLOCK
        if left < HEADER:  # a block's tail too short for a header is padding
            position += left
            continue
        _checksum, length, kind = struct.unpack("<IHB", data[position:position + HEADER])
        if (length, kind) == (0, 0):
            position += left
            continue
        chunk = data[position + HEADER:position + HEADER + length]
        position += HEADER + length
        if kind == FULL:
            yield _parse(chunk)
        elif kind == FIRST:
            pending = chunk
        elif kind == MIDDLE:
            pending += chunk
        elif kind == LAST:
            yield _parse(pending + chunk)
            pending = b""


def _parse(payload: bytes) -> Any:
    record = wandb_internal_pb2.Record()
    record.ParseFromString(payload)
    return record


def _key(item: Any) -> str:
    return ".".join(item.nested_key) if item.nested_key else item.key


@dataclass
class OfflineRun:
    """What one offline run directory holds."""

    directory: Path
    run_id: str = ""
    project: str = ""
    group: str = ""
    name: str = ""
    job_type: str = ""
    tags: list[str] = field(default_factory=list)
    config: dict[str, Any] = field(default_factory=dict)
    history: list[dict[str, Any]] = field(default_factory=list)
    summary: dict[str, Any] = field(default_factory=dict)  # nested keys joined with dots
    exit_code: int | None = None
    artifacts: list[tuple[str, str, list[str]]] = field(default_factory=list)  # name, type, file paths

    def table(self, key: str) -> dict[str, Any]:
        """A logged ``wandb.Table`` (its JSON file) by its history key."""
        return json.loads((self.directory / "files" / self.summary[f"{key}.path"]).read_text())


#: How long :func:`read_run` waits for a run's file to be whole (see there).
WHOLE_WITHIN_S = 15.0


def read_run(directory: Path) -> OfflineRun:
    """The run in ``directory``. wandb's service may still be writing a run's file for a moment after
    ``run.finish()`` returned in the same process (a sweep run in the test's process: seen in CI, the
    summary run's first record cut short, and once its file without its first record at all). A file
    that does not parse is read again until it does, for up to :data:`WHOLE_WITHIN_S`, then its error is
    raised; a file without its run record is read again as long, then returned as it is (a program killed
    at its start may never write one: the test's assertions judge it)."""
    from google.protobuf.message import DecodeError

    deadline = time.monotonic() + WHOLE_WITHIN_S
    while True:
        try:
            run = _read_run(directory)
        except (DecodeError, struct.error):  # a record cut short, or a file shorter than its header
            if time.monotonic() > deadline:
                raise
        else:
            if run.run_id or time.monotonic() > deadline:
                return run
        time.sleep(0.2)


def _read_run(directory: Path) -> OfflineRun:
    run = OfflineRun(directory)
    (run_file,) = directory.glob("run-*.wandb")
    for record in records(run_file):
        kind = record.WhichOneof("record_type")
        if kind == "run":
            r = record.run
            run.run_id, run.project, run.group, run.name, run.job_type = (
                r.run_id, r.project, r.run_group, r.display_name, r.job_type)
            run.tags = list(r.tags)
            run.config.update({_key(i): json.loads(i.value_json) for i in r.config.update})
        elif kind == "config":
            run.config.update({_key(i): json.loads(i.value_json) for i in record.config.update})
        elif kind == "history":
            run.history.append({_key(i): json.loads(i.value_json) for i in record.history.item})
        elif kind == "summary":
            for item in record.summary.update:
                run.summary[_key(item)] = json.loads(item.value_json)
        elif kind == "exit":
            run.exit_code = record.exit.exit_code
        elif kind == "artifact":
            a = record.artifact
            run.artifacts.append((a.name, a.type, [entry.path for entry in a.manifest.contents]))
    run.config.pop("_wandb", None)
    return run


def offline_run_ids(experiment_dir: Path) -> list[str]:
    """The run id of every offline run directory (``offline-run-<time>-<id>``), one per ``wandb.init``:
    read from the names, since a program ended by a signal may not have flushed its run's records."""
    return [d.name.split("-", 3)[-1] for d in sorted((experiment_dir / "wandb").glob("offline-run-*"))]


def offline_runs(experiment_dir: Path) -> list[OfflineRun]:
    """Every offline run directory of an experiment (a resumed run has one directory per attempt)."""
    return [read_run(d) for d in sorted((experiment_dir / "wandb").glob("offline-run-*"))]
