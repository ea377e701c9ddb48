"""``checkpoint.json``: the reducer's state of a session as of one journal line, so a worker that
starts reads only the journal's tail.

The journal stays the only truth: a checkpoint names the line it is current to (`JournalMark`:
seq, byte offsets and a hash of the line), and it is used only when the journal still holds that
line. It is read back only by the reducer that wrote it: its header names the reducer's code (a
digest of the modules of `tui.protocol` the state is made by), so a checkpoint written before an
upgrade, or by a reducer that has changed since, is not trusted. A checkpoint that is missing,
unreadable, of another version of `SessionState` or of the reducer, or that names a line the
journal does not hold is ignored, and the state is rebuilt from the whole journal. It is
written whole through a temporary file and a rename, so a worker killed while writing one
leaves the previous one.

The file is two lines: the mark and the reducer's digest as JSON, then the state
(`SessionState.model_dump_json`).
"""

from __future__ import annotations

import hashlib
import json
import logging
from dataclasses import asdict, dataclass
from functools import cache
from pathlib import Path

from pydantic import ValidationError

from tui.protocol import children, events, messages, output, state
from tui.protocol.state import SessionState
from tui.store._atomic import write_atomic
from tui.store.journal import JournalMark

__all__ = ["Checkpoint", "read_checkpoint", "write_checkpoint"]

log = logging.getLogger("tui.store.checkpoint")


@dataclass(frozen=True, slots=True)
class Checkpoint:
    """A session's state, current to the journal line `mark`."""

    mark: JournalMark
    state: SessionState


@cache
def reducer_digest() -> str:
    """A digest of the reducer's code: the modules that make `SessionState` from events."""
    digest = hashlib.sha256()
    for module in (state, children, output, events, messages):
        try:
            digest.update(Path(module.__file__ or "").read_bytes())
        except OSError:
            digest.update(module.__name__.encode())
    return digest.hexdigest()[:20]


def read_checkpoint(path: Path) -> Checkpoint | None:
    """The checkpoint at `path`; None when there is none, or it cannot be read by this version."""
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        return None
    except OSError as exc:
        log.warning("checkpoint %s cannot be read (%s); the journal is replayed", path, exc)
        return None
    head, _, body = data.partition(b"\n")
    try:
        fields = json.loads(head)
        if fields.get("reducer") != reducer_digest():
            log.info(
                "checkpoint %s was written by another version of the reducer; the journal is replayed", path
            )
            return None
        mark = JournalMark(
            seq=int(fields["seq"]),
            start=int(fields["start"]),
            end=int(fields["end"]),
            digest=str(fields["digest"]),
        )
        session = SessionState.model_validate_json(body)
    except (ValueError, TypeError, KeyError, AttributeError, ValidationError) as exc:
        log.warning("checkpoint %s is not one this version reads (%s); the journal is replayed", path, exc)
        return None
    if session.last_seq != mark.seq:
        log.warning("checkpoint %s does not agree with itself; the journal is replayed", path)
        return None
    return Checkpoint(mark, session)


def write_checkpoint(path: Path, mark: JournalMark, session: SessionState) -> None:
    """Replace the checkpoint at `path` with `session`, current to `mark` (atomically).

    Raises:
        OSError: it could not be written (the previous one, if any, is left).
    """
    head = json.dumps({**asdict(mark), "reducer": reducer_digest()}).encode()
    write_atomic(path, head + b"\n" + session.model_dump_json().encode() + b"\n")
