"""Bad input to a worker's bridge and to the command line: a JSON 4xx with its code, or one line,
never a 500, plain text or a traceback."""

from __future__ import annotations

import json
import socket
import sys
from collections.abc import Callable
from pathlib import Path

import pytest
from client.helpers import tui

from .conftest import Worker


def _raw(path: str, head: bytes) -> tuple[int, dict[str, str], bytes]:
    """Send `head` as is on the worker's socket; its status, headers and body."""
    with socket.socket(socket.AF_UNIX) as sock:
        sock.settimeout(20)
        sock.connect(path)
        sock.sendall(head)
        data = b""
        while chunk := sock.recv(65536):
            data += chunk
    top, _, body = data.partition(b"\r\n\r\n")
    status_line, *lines = top.decode("latin-1").split("\r\n")
    headers = {k.strip().lower(): v.strip() for k, _, v in (line.partition(":") for line in lines)}
    return int(status_line.split()[1]), headers, body


def _refused(reply: tuple[int, dict[str, str], bytes], status: int, code: str) -> dict[str, object]:
    got, headers, body = reply
    assert got == status, (got, body[:300])
    assert headers["content-type"] == "application/json", (headers, body[:300])
    wire: dict[str, object] = json.loads(body)
    assert wire["error"] == code, wire
    return wire


@pytest.mark.parametrize(
    "header",
    [
        b"Last-Event-ID: " + b"9" * 4301,  # int() refuses past 4,300 digits
        b"Last-Event-ID: " + b"1" * 5000,
        "Last-Event-ID: ☃".encode(),
    ],
    ids=["4301-digits", "5000-digits", "snowman"],
)
async def test_a_last_event_id_that_is_no_seq_is_a_json_400(worker: Worker, header: bytes) -> None:
    head = b"GET /events HTTP/1.1\r\nHost: w\r\n" + header + b"\r\nConnection: close\r\n\r\n"
    wire = _refused(_raw(worker.sidecar.socket, head), 400, "invalid_request")
    assert wire["field"] == "Last-Event-ID"
    assert len(str(wire["detail"])) < 200


@pytest.mark.parametrize(
    "head",
    [
        "GET /info HTTP/1.1\r\nHost: w\r\nX-☃: 1\r\n\r\n".encode(),  # a header name HTTP does not allow
        b"GET /info HTTP/1.1\r\nHost: w\r\nX-Note: a\x00b\r\n\r\n",
    ],
    ids=["header-name", "nul"],
)
async def test_a_head_h11_cannot_read_is_a_json_400(worker: Worker, head: bytes) -> None:
    _refused(_raw(worker.sidecar.socket, head), 400, "invalid_request")
    assert (await worker.client().get("/info")).status_code == 200


async def test_a_long_number_in_the_query_is_refused_in_a_short_sentence(worker: Worker) -> None:
    reply = await worker.client().get("/events", params={"cursor": "9" * 5000})
    assert reply.status_code == 400
    assert reply.json()["field"] == "cursor"
    assert len(reply.json()["detail"]) < 200


def test_a_prompt_past_the_limit_is_one_line_from_the_cli(new_session: Callable[[], str]) -> None:
    sid = new_session()
    big = 'x = "' + "a" * 1_100_000 + '"\n'
    for extra in (["--whole"], []):
        out = tui("attach", *extra, sid, input=big)
        assert out.returncode == 1, out.stderr[-2000:]
        assert "Traceback" not in out.stderr, out.stderr[-2000:]
        lines = out.stderr.strip().splitlines()
        assert len(lines) == 1 and "at most 1,000,000" in lines[0], out.stderr[-2000:]


def test_tui_send_of_a_prompt_past_the_limit_is_one_line(state_dir: Path) -> None:
    # A command line this long cannot be exec'd: run the CLI in a child Python with it in argv.
    code = "import sys; from tui.cli import main; sys.exit(main(['send', '--new', 'a' * 1_100_000]))"
    import subprocess

    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert out.returncode == 1, out.stderr[-2000:]
    assert "Traceback" not in out.stderr
    assert out.stderr.strip().splitlines()[-1].endswith("send a turn that reads the file"), out.stderr


async def test_headers_past_the_limit_are_a_json_413(worker: Worker) -> None:
    head = b"GET /info HTTP/1.1\r\nHost: w\r\nX-Note: " + b"n" * 100_000 + b"\r\nConnection: close\r\n\r\n"
    wire = _refused(_raw(worker.sidecar.socket, head), 413, "too_large")
    assert "64 KiB" in str(wire["detail"])
