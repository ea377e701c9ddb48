"""The one error tree of tui.

Every failure a person may see is a `TuiError`. Foreign errors (OS, httpx, pydantic) are mapped
into this tree at the boundary where they happen, with ``raise ... from exc``; the command line
prints ``str(error)`` and exits with ``error.exit_code``. On the wire a refusal is
``{"error": code, "detail": sentence, …fields}``. Each wire code is one class, and its HTTP status
and exit code are class attributes (a family sets them, a case may narrow the status);
`error_from_wire` is the one way back from the wire, so a remote refusal reads exactly like a
local one.

    TuiError                       error                 500  exit 1
    ├── UsageError                 usage                 400  exit 2 (bad arguments)
    ├── NotFound                   not_found             404
    │   ├── UnknownTurn            unknown_turn          (no such turn in this session)
    │   └── UnknownCall            unknown_call          (no such tool call in that turn)
    ├── AmbiguousId                ambiguous_id          409
    ├── InvalidRequest             invalid_request       400
    │   ├── InvalidAnswer          invalid_answer        400
    │   ├── InvalidModel           invalid_model         400
    │   ├── MethodNotAllowed       method_not_allowed    405
    │   ├── RequestTimeout         request_timeout       408
    │   └── BadCursor              bad_cursor            409
    ├── Conflict                   conflict              409
    │   ├── Busy                   busy
    │   ├── QuestionNotPending     question_not_pending
    │   ├── WorkerRunning          worker_running
    │   └── Locked                 locked
    ├── TooLarge                   too_large             413
    │   └── NotAnImage             not_an_image          415
    ├── WorkerUnavailable          no_worker             503  exit 4
    │   ├── WorkerGone             worker_gone
    │   ├── WorkerStarting         (no_worker)
    │   ├── ServerStopping         server_stopping
    │   └── ServerBusy             server_busy
    ├── Unreachable                unreachable           502
    ├── DiskFull                   disk_full             507 (the journal or a turn record)
    ├── UnreadableEvent            (error)                   (a stream sent what this version cannot read)
    └── Refused                    refused               403  exit 6
        ├── Unauthorized           unauthorized          401
        ├── TokenRevoked           token_revoked         401
        ├── TokenExpired           token_expired         401
        ├── Forbidden              forbidden             403
        ├── NotPermitted           not_permitted         403
        ├── Misdirected            misdirected           421
        ├── TooManyTurns           too_many_turns        429
        └── CapReached             cap_reached           429
"""

from __future__ import annotations

from typing import Any, ClassVar

__all__ = [
    "AmbiguousId",
    "BadCursor",
    "Busy",
    "CapReached",
    "Conflict",
    "DiskFull",
    "Forbidden",
    "InvalidAnswer",
    "InvalidModel",
    "InvalidRequest",
    "Locked",
    "MethodNotAllowed",
    "Misdirected",
    "NotAnImage",
    "NotFound",
    "NotPermitted",
    "QuestionNotPending",
    "RateLimited",
    "Refused",
    "RequestTimeout",
    "ServerBusy",
    "ServerStopping",
    "TokenExpired",
    "TokenRevoked",
    "TooLarge",
    "TooManyTurns",
    "TuiError",
    "Unauthorized",
    "UnknownCall",
    "UnknownTurn",
    "Unreachable",
    "UnreadableEvent",
    "UsageError",
    "WorkerGone",
    "WorkerRunning",
    "WorkerStarting",
    "WorkerUnavailable",
    "error_from_wire",
    "os_error",
]

_BY_CODE: dict[str, type[TuiError]] = {}


class TuiError(Exception):
    """Root of every error a person may see.

    Attributes:
        code: the wire code (`protocol.md`), also used in logs; one class per code.
        status: the HTTP status a server answers with.
        exit_code: what the command line exits with.
        title: a short heading for the UI.
        fields: extra JSON-compatible fields sent with the refusal.
    """

    code: ClassVar[str] = "error"
    status: ClassVar[int] = 500
    exit_code: ClassVar[int] = 1
    title: ClassVar[str] = "Error"

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        if "code" in cls.__dict__:
            if cls.code in _BY_CODE:
                raise TypeError(f"wire code {cls.code!r} has two classes: {_BY_CODE[cls.code]} and {cls}")
            _BY_CODE[cls.code] = cls

    def __init__(self, detail: str, **fields: Any) -> None:
        super().__init__(detail)
        self.detail = detail
        self.fields = fields

    def to_wire(self) -> dict[str, Any]:
        """The JSON body of a refusal carrying this error."""
        return {"error": self.code, "detail": self.detail, **self.fields}


_BY_CODE[TuiError.code] = TuiError


class UsageError(TuiError):
    code = "usage"
    status = 400
    exit_code = 2
    title = "Usage"


class NotFound(TuiError):
    code = "not_found"
    status = 404
    title = "Not found"


class UnknownTurn(NotFound):
    """A turn id names no turn of this session."""

    code = "unknown_turn"


class UnknownCall(NotFound):
    """A tool call id names no call of that turn."""

    code = "unknown_call"


class AmbiguousId(TuiError):
    code = "ambiguous_id"
    status = 409
    title = "Ambiguous id"


class InvalidRequest(TuiError):
    code = "invalid_request"
    status = 400
    title = "Invalid request"


class InvalidAnswer(InvalidRequest):
    """A label not offered, several when one is asked, free text when not allowed."""

    code = "invalid_answer"


class MethodNotAllowed(InvalidRequest):
    """A route that exists, asked with a method it does not take (its ``Allow`` header lists them)."""

    code = "method_not_allowed"
    status = 405


class RequestTimeout(InvalidRequest):
    """A request's head or body did not arrive in time."""

    code = "request_timeout"
    status = 408


class InvalidModel(InvalidRequest):
    """A model this session cannot switch to."""

    code = "invalid_model"


class BadCursor(InvalidRequest):
    """A cursor ahead of the journal: never a silent gap."""

    code = "bad_cursor"
    status = 409


class Conflict(TuiError):
    code = "conflict"
    status = 409
    title = "Not now"


class Busy(Conflict):
    """A turn is running and the prompt was to start now."""

    code = "busy"


class QuestionNotPending(Conflict):
    code = "question_not_pending"


class BudgetReached(Conflict):
    """The session reached one of its limits (``tui budget``): a new turn is refused until it
    is raised; `tui send --wait` exits 7 as for a turn stopped at it."""

    code = "budget_reached"
    exit_code = 7


class WorkerRunning(Conflict):
    """The session's worker is live, and the command needs it stopped."""

    code = "worker_running"


class Locked(Conflict):
    """Another worker holds the session's owner lock."""

    code = "locked"


class TooLarge(TuiError):
    code = "too_large"
    status = 413
    title = "Too large"


class NotAnImage(TooLarge):
    code = "not_an_image"
    status = 415


class WorkerUnavailable(TuiError):
    code = "no_worker"
    status = 503
    exit_code = 4
    title = "Worker unavailable"


class WorkerGone(WorkerUnavailable):
    """The worker stopped answering (a transport failure, or 502/503/504 without a reason)."""

    code = "worker_gone"


class WorkerStarting(WorkerUnavailable):
    """A worker was started and runs, but its bridge was not ready within the wait: ask again soon.

    Never on the wire (a wake answers ``starting``); it carries ``no_worker`` if it ever is.
    """


class ServerStopping(WorkerUnavailable):
    """The web bridge is shutting down; asking again in a second is right."""

    code = "server_stopping"


class ServerBusy(WorkerUnavailable):
    """The web bridge has as many connections open as it keeps; asking again soon is right."""

    code = "server_busy"


class Unreachable(TuiError):
    """Another machine could not be asked."""

    code = "unreachable"
    status = 502
    title = "Unreachable"


class DiskFull(TuiError):
    """A worker could not write its journal or a turn record (disk full, I/O error).

    Nothing half-written stays behind; the next request that needs a write tries again, so once
    space returns the session goes on with nothing lost. ``path`` names the file.
    """

    code = "disk_full"
    status = 507
    title = "Disk full"


def os_error(exc: OSError, path: object, doing: str = "write") -> TuiError:
    """An OS error on a file of tui's as one sentence naming the path and what to do.

    A full disk is `DiskFull` (with ``path``); a read-only file system, a missing permission or
    a folder that vanished say so; anything else names the OS's words.
    """
    import errno

    where = str(path)
    reason = exc.strerror or type(exc).__name__
    if exc.errno in (errno.ENOSPC, errno.EDQUOT):
        return DiskFull(f"disk full: cannot {doing} {where}; free some space and try again", path=where)
    if exc.errno == errno.EROFS:
        hint = "remount it read-write, or point TUI_STATE_DIR (--state-dir) at a writable folder"
        return TuiError(f"cannot {doing} {where}: the file system is read-only; {hint}")
    if exc.errno in (errno.EACCES, errno.EPERM):
        return TuiError(f"cannot {doing} {where}: permission denied; check the owner and mode of that folder")
    if exc.errno == errno.ENOENT:
        return TuiError(
            f"cannot {doing} {where}: it (or a folder above it) does not exist any more; "
            "was the state dir deleted? `tui sessions` lists what is left"
        )
    return TuiError(f"cannot {doing} {where}: {reason}")


class UnreadableEvent(TuiError):
    """A stream sent an event this version cannot read: following on would loop on it for ever."""


class Refused(TuiError):
    code = "refused"
    status = 403
    exit_code = 6
    title = "Refused"


class Unauthorized(Refused):
    code = "unauthorized"
    status = 401


class TokenRevoked(Refused):
    code = "token_revoked"
    status = 401


class TokenExpired(Refused):
    code = "token_expired"
    status = 401


class Forbidden(Refused):
    """A request from a web page of another origin."""

    code = "forbidden"


class NotPermitted(Refused):
    """What this principal's kind may not do."""

    code = "not_permitted"


class Misdirected(Refused):
    """A ``Host`` that is not the web bridge's own address."""

    code = "misdirected"
    status = 421


class TooManyTurns(Refused):
    """A collaborator's share has no turns left."""

    code = "too_many_turns"
    status = 429


class CapReached(Refused):
    """A participant's token holds as many open streams as it may."""

    code = "cap_reached"
    status = 429


class RateLimited(Refused):
    """Too many wrong sign-in codes from one address, or from everyone; ``retry_after`` seconds."""

    code = "rate_limited"
    status = 429


# A status without a known code (a proxy's answer, a newer server's code) maps to its family.
_BY_STATUS: dict[int, type[TuiError]] = {
    400: InvalidRequest,
    401: Unauthorized,
    403: Refused,
    404: NotFound,
    405: MethodNotAllowed,
    408: RequestTimeout,
    409: Conflict,
    413: TooLarge,
    415: NotAnImage,
    421: Misdirected,
    429: Refused,
    502: WorkerGone,
    503: WorkerGone,
    504: WorkerGone,
    507: DiskFull,
}


def error_from_wire(body: Any, status: int, *, who: str = "the server") -> TuiError:
    """Turn a refusal back into its exception: the one mapper from the wire.

    Args:
        body: the decoded JSON body, or anything else a server sent.
        status: the HTTP status it came with.
        who: how a sentence names the other end when it sent none (``the worker of session 3f2a``).

    Returns:
        The class of the body's code, carrying the server's sentence and fields; for a code this
        version does not know, or no refusal body at all, the family of the HTTP status.
    """
    if isinstance(body, dict) and isinstance(body.get("error"), str):
        code = body["error"]
        detail = str(body.get("detail") or code)
        fields = {k: v for k, v in body.items() if k not in ("error", "detail")}
        cls = _BY_CODE.get(code) or _BY_STATUS.get(status, TuiError)
        return cls(detail, **fields)
    cls = _BY_STATUS.get(status, TuiError)
    if issubclass(cls, WorkerUnavailable):
        return cls(f"{who} is not available (HTTP {status})")
    if issubclass(cls, Refused):
        return cls(f"{who} refused this client (HTTP {status})")
    return cls(f"{who} answered HTTP {status} without a reason")
