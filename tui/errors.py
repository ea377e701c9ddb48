"""The one error tree of tui.

Every failure a person may see is a `TuiError`. Foreign errors (OS, httpx, pydantic) are mapped
into this tree at the boundary where they happen, with ``raise ... from exc``; the command line
prints ``str(error)`` and exits with ``error.exit_code``. On the wire a refusal is
``{"error": code, "detail": sentence}``; `error_from_wire` turns it back into the same class, so
a remote refusal reads exactly like a local one.

    TuiError                      exit 1
    ├── UsageError                exit 2   (bad arguments)
    ├── NotFound                  not_found: no such session, queue item, question
    ├── AmbiguousId               ambiguous_id: a prefix that matches several sessions
    ├── InvalidRequest            invalid_request / invalid_answer / invalid_model / bad_cursor
    ├── Conflict                  busy, question_not_pending, worker_running, locked
    ├── TooLarge                  413 too_large, 415 not_an_image
    ├── WorkerUnavailable         exit 4   no_worker, worker_gone, server_stopping
    ├── Unreachable               a remote machine could not be asked
    └── Refused                   exit 6   unauthorized, token_revoked, token_expired,
                                           forbidden, misdirected, not_permitted,
                                           too_many_turns, cap_reached
"""

from __future__ import annotations

from typing import Any, ClassVar

__all__ = [
    "AmbiguousId",
    "Conflict",
    "InvalidRequest",
    "NotFound",
    "Refused",
    "TooLarge",
    "TuiError",
    "Unreachable",
    "UsageError",
    "WorkerUnavailable",
    "error_from_wire",
]


class TuiError(Exception):
    """Root of every error a person may see.

    Attributes:
        code: the wire code (`protocol.md`), also used in logs.
        status: the HTTP status a server answers with.
        exit_code: what the command line exits with.
        title: a short heading for the UI.
        fields: extra JSON-compatible fields sent with the refusal.
    """

    code: ClassVar[str] = "error"
    status: ClassVar[int] = 500
    exit_code: ClassVar[int] = 1
    title: ClassVar[str] = "Error"

    def __init__(self, detail: str, *, code: str | None = None, **fields: Any) -> None:
        super().__init__(detail)
        self.detail = detail
        if code is not None:
            self.code = code  # type: ignore[misc]
        self.fields = fields

    def to_wire(self) -> dict[str, Any]:
        """The JSON body of a refusal carrying this error."""
        return {"error": self.code, "detail": self.detail, **self.fields}


class UsageError(TuiError):
    code = "usage"
    status = 400
    exit_code = 2
    title = "Usage"


class NotFound(TuiError):
    code = "not_found"
    status = 404
    title = "Not found"


class AmbiguousId(TuiError):
    code = "ambiguous_id"
    status = 409
    title = "Ambiguous id"


class InvalidRequest(TuiError):
    code = "invalid_request"
    status = 400
    title = "Invalid request"


class Conflict(TuiError):
    code = "busy"
    status = 409
    title = "Not now"


class TooLarge(TuiError):
    code = "too_large"
    status = 413
    title = "Too large"


class WorkerUnavailable(TuiError):
    code = "no_worker"
    status = 503
    exit_code = 4
    title = "Worker unavailable"


class Unreachable(TuiError):
    code = "unreachable"
    status = 502
    title = "Unreachable"


class Refused(TuiError):
    code = "unauthorized"
    status = 401
    exit_code = 6
    title = "Refused"


_BY_CODE: dict[str, type[TuiError]] = {
    "usage": UsageError,
    "not_found": NotFound,
    "ambiguous_id": AmbiguousId,
    "invalid_request": InvalidRequest,
    "invalid_answer": InvalidRequest,
    "invalid_model": InvalidRequest,
    "bad_cursor": InvalidRequest,
    "busy": Conflict,
    "question_not_pending": Conflict,
    "worker_running": Conflict,
    "locked": Conflict,
    "too_large": TooLarge,
    "not_an_image": TooLarge,
    "no_worker": WorkerUnavailable,
    "worker_gone": WorkerUnavailable,
    "server_stopping": WorkerUnavailable,
    "unreachable": Unreachable,
    "unauthorized": Refused,
    "token_revoked": Refused,
    "token_expired": Refused,
    "forbidden": Refused,
    "misdirected": Refused,
    "not_permitted": Refused,
    "too_many_turns": Refused,
    "cap_reached": Refused,
}


def error_from_wire(body: Any, status: int) -> TuiError:
    """Turn a refusal body (``{"error", "detail", ...}``) back into its exception.

    Args:
        body: the decoded JSON body, or anything else a server sent.
        status: the HTTP status it came with.

    Returns:
        The `TuiError` subclass for the code, carrying the server's sentence.
    """
    if isinstance(body, dict) and isinstance(body.get("error"), str):
        code = body["error"]
        detail = str(body.get("detail") or code)
        fields = {k: v for k, v in body.items() if k not in ("error", "detail")}
        cls = _BY_CODE.get(code, TuiError)
        return cls(detail, code=code, **fields)
    return TuiError(f"the server answered HTTP {status} without a reason", code="error")
