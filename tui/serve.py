"""The server side of the route table, shared by the worker's bridge and the web bridge.

`routes` turns `RouteSpec`s and one handler per route name into Starlette routes: one `Route`
per path (so a 405 lists every method of the path in ``Allow``), each answer encoded with the
route's success status. Bodies are read with a limit and validated into the route's model; every
refusal is ``{"error", "detail", …}`` with its class's status (`handlers`).
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Awaitable, Callable, Iterable, Mapping
from typing import Any, TypeVar

import pydantic_core
from pydantic import BaseModel, ValidationError
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route
from uvicorn.protocols.http.h11_impl import H11Protocol

from tui.errors import (
    InvalidRequest,
    MethodNotAllowed,
    NotFound,
    RequestTimeout,
    TooLarge,
    TuiError,
    error_from_wire,
)
from tui.protocol.routes import RouteSpec

__all__ = [
    "MAX_BODY",
    "MAX_HEAD",
    "Handler",
    "JsonH11",
    "decode",
    "flag",
    "handlers",
    "int_param",
    "parse_body",
    "raw_refusal",
    "read_body",
    "refusal",
    "routes",
    "seq_header",
]

MAX_BODY = 4 * 1024 * 1024
"""The largest request body read; more gets 413."""
_DRAIN_LIMIT = 64 * 1024 * 1024
"""A body past the limit is read and dropped up to this much, so the client hears the 413."""
DRAIN_WAIT = 2.0
"""Seconds a body past the limit is read and dropped before the 413 is sent anyway."""
BODY_IDLE = 10.0
"""Seconds a body may pause before the request is answered 408."""

M = TypeVar("M", bound=BaseModel)
Handler = Callable[[Request], Awaitable[Any]]
"""A route's handler: its answer (a model, or any JSON-able value), or a whole `Response`."""


def refusal(error: TuiError) -> JSONResponse:
    """A refusal as the wire carries it: ``{"error", "detail", …}`` with its class's status."""
    return JSONResponse(error.to_wire(), status_code=error.status)


def raw_refusal(error: TuiError) -> bytes:
    """A whole HTTP response carrying `error`'s refusal, for a connection no app will answer."""
    body = json.dumps(error.to_wire()).encode()
    head = (
        f"HTTP/1.1 {error.status} {error.title}\r\n"
        "content-type: application/json\r\n"
        f"content-length: {len(body)}\r\n"
        "connection: close\r\n"
    )
    if error.status == 503:
        head += "retry-after: 1\r\n"
    return head.encode() + b"\r\n" + body


class JsonH11(H11Protocol):
    """uvicorn's h11 protocol whose answer to a request h11 cannot parse (a header name or value
    HTTP does not allow, a head past h11's size limit) is a JSON 400 ``invalid_request``, as every
    other refusal, instead of uvicorn's plain text."""

    def send_400_response(self, msg: str) -> None:
        error = InvalidRequest(f"not an HTTP request this server can read ({msg.rstrip('.')})")
        self.transport.write(raw_refusal(error))
        self.transport.close()


def _encode(value: Any) -> bytes:
    if isinstance(value, BaseModel):
        return value.model_dump_json().encode()
    return pydantic_core.to_json(value)


MAX_HEAD = 64 * 1024
"""The most bytes of header names and values a request may carry; more gets 413."""


def _check_head(request: Request) -> None:
    size = sum(len(name) + len(value) for name, value in request.scope["headers"])
    if size > MAX_HEAD:
        raise TooLarge(
            f"the request's headers are {size:,} bytes; at most {MAX_HEAD // 1024} KiB are read: send fewer",
            limit=MAX_HEAD,
        )


def _endpoint(spec: RouteSpec, handler: Handler) -> Handler:
    async def endpoint(request: Request) -> Response:
        _check_head(request)
        value = await handler(request)
        if isinstance(value, Response):
            return value
        return Response(_encode(value), status_code=spec.status, media_type=spec.media)

    endpoint.__name__ = spec.name
    return endpoint


def routes(specs: Iterable[RouteSpec], by_name: Mapping[str, Handler], *, prefix: str = "") -> list[Route]:
    """Starlette routes for `specs`, each served by the handler of its name.

    Args:
        specs: the routes to serve.
        by_name: one handler per route name; a spec without one, or one without a spec, is an error.
        prefix: taken off each path (the routes go inside a `Mount` at `prefix`).

    Raises:
        ValueError: the handlers and the specs do not match one to one.
    """
    specs = list(specs)
    names = {spec.name for spec in specs}
    if names != set(by_name):
        raise ValueError(
            f"routes without a handler: {names - set(by_name)}; handlers without a route: "
            f"{set(by_name) - names}"
        )
    by_path: dict[str, dict[str, Handler]] = {}
    for spec in specs:
        path = spec.path.removeprefix(prefix) or "/"
        by_path.setdefault(path, {})[spec.method] = _endpoint(spec, by_name[spec.name])
    return [Route(path, _dispatch(methods), methods=list(methods)) for path, methods in by_path.items()]


def _dispatch(methods: dict[str, Handler]) -> Handler:
    if len(methods) == 1:
        return next(iter(methods.values()))

    async def endpoint(request: Request) -> Any:
        method = "GET" if request.method == "HEAD" else request.method
        return await methods[method](request)

    return endpoint


def handlers(hint: str) -> dict[Any, Callable[[Request, Exception], Awaitable[Response]]]:
    """Starlette exception handlers: a `TuiError` as its refusal, Starlette's own 404 and 405 too.

    Args:
        hint: where a person finds the routes, for the 404's sentence (``see GET /info``).
    """

    async def on_tui_error(request: Request, exc: Exception) -> Response:
        assert isinstance(exc, TuiError)
        return refusal(exc)

    async def on_http_error(request: Request, exc: Exception) -> Response:
        assert isinstance(exc, HTTPException)
        where = f"{request.method} {request.url.path}"
        error: TuiError
        if exc.status_code == 404:
            error = NotFound(f"no route {where}; {hint}")
        elif exc.status_code == 405:
            allowed = (exc.headers or {}).get("Allow", "")
            error = MethodNotAllowed(f"{where}: this route takes {allowed or 'other methods'}")
        else:
            error = error_from_wire({"error": "", "detail": f"{where}: {exc.detail}"}, exc.status_code)
        response = refusal(error)
        response.headers.update(exc.headers or {})
        return response

    return {TuiError: on_tui_error, HTTPException: on_http_error}


async def read_body(request: Request, limit: int = MAX_BODY) -> bytes:
    """The request's body, at most `limit` bytes, each part within `BODY_IDLE` seconds.

    Raises:
        TooLarge: the body is larger (what comes within `DRAIN_WAIT` seconds is read and
            dropped, so the client hears the 413).
        RequestTimeout: the body stopped arriving (408).
    """
    declared = request.headers.get("content-length")
    chunks: list[bytes] = []
    size = 0
    over = declared is not None and declared.isdigit() and int(declared) > limit
    drain_until: float | None = None
    parts = request.stream().__aiter__()
    while True:
        wait = BODY_IDLE
        if over:
            now = asyncio.get_running_loop().time()
            drain_until = drain_until or now + DRAIN_WAIT
            wait = drain_until - now
        try:
            chunk = await asyncio.wait_for(parts.__anext__(), max(0.0, wait))
        except StopAsyncIteration:
            break
        except TimeoutError:
            if over:
                break
            raise RequestTimeout(
                f"the body stopped arriving ({size} bytes in, none for {BODY_IDLE:g} s); send it again"
            ) from None
        size += len(chunk)
        if size > limit:
            if declared is None:
                # No length was declared (a chunked body): nothing says how much more will come,
                # so it is cut here, at the limit, rather than read on for `DRAIN_WAIT` seconds.
                over = True
                break
            over = True
        if not over:
            chunks.append(chunk)
        elif size > _DRAIN_LIMIT:
            break
    if over:
        raise TooLarge(f"the body is larger than {limit // (1024 * 1024)} MiB; send less", limit=limit)
    return b"".join(chunks)


def decode(raw: bytes, model: type[M]) -> M:
    """A JSON body validated as `model` (an empty body is ``{}``; blanks are not JSON).

    Raises:
        InvalidRequest: not JSON, or a field that does not validate (named in the sentence).
    """
    try:
        data = json.loads(raw) if raw else {}
    except (ValueError, UnicodeDecodeError) as exc:
        raise InvalidRequest(f"the body is not valid JSON: {exc}") from exc
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        first = exc.errors()[0]
        field = ".".join(str(p) for p in first["loc"]) or "body"
        raise InvalidRequest(f"{field}: {first['msg']}", field=field) from exc


async def parse_body(request: Request, model: type[M]) -> M:
    """The request's JSON body validated as `model` (see `decode`)."""
    return decode(await read_body(request), model)


def int_param(request: Request, name: str, default: int, *, low: int = 0, high: int | None = None) -> int:
    """A whole-number query parameter.

    Raises:
        InvalidRequest: not a whole number, or out of bounds.
    """
    text = request.query_params.get(name)
    if text is None or text == "":
        return default
    try:
        if len(text) > _MAX_DIGITS:
            raise ValueError(text)
        value = int(text)
    except ValueError:
        raise InvalidRequest(f"{name}: {text[:40]!r} is not a whole number", field=name) from None
    if value < low or (high is not None and value > high):
        bound = f"between {low} and {high}" if high is not None else f"at least {low}"
        raise InvalidRequest(f"{name}: must be {bound}, not {value}", field=name)
    return value


_MAX_DIGITS = 30
"""A number longer than this is refused before `int` reads it (Python refuses past 4,300 digits)."""


def seq_header(request: Request, name: str = "last-event-id") -> int | None:
    """A seq in a request header (``Last-Event-ID``): None when absent or blank.

    Raises:
        InvalidRequest: not an ASCII whole number of at most 30 digits (400, naming the header).
    """
    text = (request.headers.get(name) or "").strip()
    if not text:
        return None
    if not (text.isascii() and text.isdigit() and len(text) <= _MAX_DIGITS):
        shown = text if len(text) <= 40 else f"{text[:40]}… ({len(text)} characters)"
        raise InvalidRequest(f"{_title(name)}: {shown!r} is not a seq", field=_title(name))
    return int(text)


def _title(header: str) -> str:
    return "-".join("ID" if part == "id" else part.capitalize() for part in header.split("-"))


def flag(value: str | None) -> bool:
    """A yes/no query parameter: ``1``, ``true``, ``yes`` or ``on`` is yes."""
    return (value or "").lower() in ("1", "true", "yes", "on")
