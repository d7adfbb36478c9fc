#!/usr/bin/env python3
"""A converge worker in Python: the `pynote` kind writes each resource's text to a file.

    python worker.py manifest      # prints the kind's manifest, generated from the types below
    python worker.py               # serves the kind (BROKER_ADDR, WORKER_NAME, ... LOG_LEVEL)

A `pynote` resource's spec says what to write (`text`, `copies`); the worker writes
`<directory>/<name>.txt`, where the directory comes from the kind's provider config
(`NoteConfig`) or, without one, `$NOTES_DIR` (default `/tmp/converge-notes`). Its status says
where, how many bytes and the file's SHA-256. Deleting the resource runs the `teardown`
reaction, which removes the file before the resource goes (the manifest's finalizer).

The manifest's spec, status and config schemas are generated from `NoteSpec`, `NoteStatus`
and `NoteConfig` (`converge_sdk.kind_manifest`, pydantic under the hood), the same types the
handler decodes and builds with: converge refuses a spec these types would refuse, at apply.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import sys
from dataclasses import dataclass, field
from pathlib import Path

from pydantic import ConfigDict, Field

from converge_sdk import (
    Condition,
    KindVersion,
    Outcome,
    Provider,
    Reaction,
    ReactionRequest,
    Stage,
    TerminalError,
    kind_manifest,
    run_worker,
)

KIND = KindVersion("pynote", 1)
FINALIZER = "examples.converge.dev/pynote-file"
log = logging.getLogger("pynote")


@dataclass
class NoteSpec:
    """What a note says. A misspelt key is refused at apply (extra="forbid")."""

    __pydantic_config__ = ConfigDict(extra="forbid")

    text: str = field(metadata={"description": "The note's text, written once per copy."})
    copies: int = field(default=1, metadata={"ge": 1, "le": 100})


@dataclass
class NoteStatus:
    path: str
    bytes: int
    sha256: str
    observed_generation: int


@dataclass
class NoteConfig:
    """The kind's provider config: where notes are written."""

    directory: str = field(metadata={"description": "An absolute directory; created if missing."})


def notes_dir(req: ReactionRequest) -> Path:
    cfg = req.effective_config()
    if isinstance(cfg, dict) and isinstance(cfg.get("directory"), str):
        return Path(cfg["directory"])
    return Path(os.environ.get("NOTES_DIR") or "/tmp/converge-notes")


class Note(Provider):
    kind = KIND

    async def work(self, req: ReactionRequest) -> Outcome:
        path = notes_dir(req) / f"{req.resource.name}.txt"
        if req.stage == Stage.DELETE:
            path.unlink(missing_ok=True)
            log.info("removed %s", path)
            return Outcome()
        spec: NoteSpec = req.spec(NoteSpec)
        if not path.parent.is_absolute():
            raise TerminalError(f"the notes directory {str(path.parent)!r} is not absolute")
        body = "".join(f"{spec.text}\n" for _ in range(spec.copies)).encode()
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(body)  # an OSError is transient: retried with backoff
        log.info("wrote %s (%d bytes, generation %d)", path, len(body), req.generation)
        status = NoteStatus(str(path), len(body), hashlib.sha256(body).hexdigest(), req.generation)
        return Outcome(status=status.__dict__).with_condition(
            Condition.ready(True, "Written", f"{spec.copies} line(s) in {path}")
        )


def manifest() -> dict[str, object]:
    return kind_manifest(
        KIND,
        description="A note written to a file by the Python example worker (examples/python-worker).",
        spec=NoteSpec,
        status=NoteStatus,
        config=NoteConfig,
        reactions=[Reaction.work(), Reaction.teardown()],
        finalizer_name=FINALIZER,
        task_deadline_secs=30,
    )


if __name__ == "__main__":
    if sys.argv[1:] == ["manifest"]:
        print(json.dumps(manifest(), indent=2))
    elif sys.argv[1:]:
        sys.exit(f"usage: {sys.argv[0]} [manifest]")
    else:
        run_worker([Note()])  # logs to stderr, drains on SIGTERM/SIGINT
