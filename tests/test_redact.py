"""The redactor (`tui.redact`) on a seeded corpus of fake secrets of real shapes: none survives,
whole or split across two output pieces, in text, JSON, an event stream or an export."""

from __future__ import annotations

import json
import random
import string

import pytest

from tui.redact import PieceRedactor, StreamRedactor, length_class, redact, redact_frame, redact_json
from tui.worker.notify import Notice, redacted

_rng = random.Random(43)


def _pick(alphabet: str, n: int) -> str:
    return "".join(_rng.choice(alphabet) for _ in range(n))


UP, LOW, DIG = string.ascii_uppercase, string.ascii_lowercase, string.digits
ALNUM = UP + LOW + DIG
B64 = ALNUM + "+/"

PEM_BODY = "\n".join(_pick(B64, 64) for _ in range(6))
# (how it is printed, the secret in it)
CORPUS: list[tuple[str, str]] = [
    (f"aws_access_key_id = {(k := 'AKIA' + _pick(UP + DIG, 16))}", k),
    (f"export AWS_ACCESS_KEY_ID={(k := 'ASIA' + _pick(UP + DIG, 16))}", k),
    (f'aws_secret_access_key = "{(k := _pick(B64, 40))}"', k),
    (f"GITHUB_TOKEN: {(k := 'ghp_' + _pick(ALNUM, 36))}", k),
    (f"remote: https://x:{(k := 'glpat-' + _pick(ALNUM, 20))}@gitlab.example.com/a.git", k),
    (f"slack {(k := 'xoxb-' + _pick(DIG, 12) + '-' + _pick(DIG, 12) + '-' + _pick(LOW + DIG, 24))}", k),
    (f"stripe: {(k := 'sk_live_' + _pick(ALNUM, 24))}", k),
    (
        f"Authorization: Bearer {(k := 'eyJhbGciOiJIUzI1NiJ9.' + 'eyJzdWIiOiIxMjM0In0.' + _pick(ALNUM, 43))}",
        k,
    ),
    (f"SENDGRID_API_KEY={(k := 'SG.' + _pick(ALNUM, 22) + '.' + _pick(ALNUM, 43))}", k),
    (f"twilio sid {(k := 'AC' + _pick('abcdef' + DIG, 32))}", k),
    (f"//registry.npmjs.org/:_authToken={(k := 'npm_' + _pick(ALNUM, 36))}", k),
    (f"DATABASE_URL=postgres://app:{(k := _pick(ALNUM, 18))}@db.internal:5432/prod", k),
    (f"mongodb+srv://root:{(k := _pick(ALNUM, 16))}@cluster0.example.net/test", k),
    (f"DB_PASSWORD={(k := _pick(ALNUM, 14))}", k),
    (f"API_KEY={(k := _pick(ALNUM, 32))}", k),
    (f"secret_key: '{(k := _pick(ALNUM, 24))}'", k),
    (f"AccountKey={(k := _pick(B64, 86) + '==')}", k),
    (f"-----BEGIN RSA PRIVATE KEY-----\n{PEM_BODY}\n-----END RSA PRIVATE KEY-----", PEM_BODY),
    (f"-----BEGIN OPENSSH PRIVATE KEY-----\n{PEM_BODY}\n-----END OPENSSH PRIVATE KEY-----", PEM_BODY),
    (f"-----BEGIN EC PRIVATE KEY-----\n{PEM_BODY}\n-----END EC PRIVATE KEY-----", PEM_BODY),
]


def _leaks(out: str, secret: str) -> list[str]:
    """The parts of `secret` (whole, or a line of a key, or its first/last 12) found in `out`."""
    parts = [secret, *(ln for ln in secret.splitlines() if len(ln) >= 12)]
    if len(secret) >= 24:
        parts += [secret[:12], secret[-12:]]
    return [p for p in parts if p in out]


@pytest.mark.parametrize(("printed", "secret"), CORPUS, ids=[str(i) for i in range(len(CORPUS))])
def test_no_secret_of_the_corpus_survives_text_json_or_a_frame(printed: str, secret: str) -> None:
    out = redact(f"running…\n{printed}\ndone\n")
    assert not _leaks(out, secret), out
    assert "[redacted: " in out and out.startswith("running…\n") and out.endswith("done\n")
    doc = json.dumps({"seq": 3, "type": "text", "turn_id": "t-1", "text": printed + "\n"}).encode()
    clean = json.loads(redact_json(doc))
    assert clean["seq"] == 3 and clean["turn_id"] == "t-1" and not _leaks(clean["text"], secret)
    frame = b"id: 3\nevent: text\ndata: " + doc
    assert not _leaks(redact_frame(frame).decode(), secret)


def test_a_mark_says_the_kind_and_a_length_class_not_the_length() -> None:
    assert [length_class(n) for n in (1, 8, 9, 16, 17, 32, 33, 1700)] == [
        "up to 8 chars",
        "up to 8 chars",
        "9-16 chars",
        "9-16 chars",
        "17-32 chars",
        "17-32 chars",
        "33-64 chars",
        "1025-2048 chars",
    ]
    # Two passwords of different lengths in one class show the same; a longer one shows longer.
    assert redact("DB_PASSWORD=hunter2hunter2x\n") == redact("DB_PASSWORD=Zq8vN2xLp0Rt\n")
    assert redact("DB_PASSWORD=Zq8vN2xLp0Rt\n") == "DB_PASSWORD=[redacted: secret, 9-16 chars]\n"
    assert redact(CORPUS[17][0]) == "[redacted: private key, 257-512 chars]"  # BEGIN to END, 451


def _frame(seq: int, text: str, typ: str = "tool_output") -> bytes:
    data = {
        "seq": seq,
        "at": "2026-01-01T00:00:00Z",
        "type": typ,
        "turn_id": "t-1",
        "call_id": "c-1",
        "text": text,
    }
    return b"id: %d\nevent: %s\ndata: %s" % (seq, typ.encode(), json.dumps(data).encode())


def _texts(messages: list[bytes]) -> str:
    return "".join(json.loads(m.split(b"data: ", 1)[1])["text"] for m in messages)


@pytest.mark.parametrize(("printed", "secret"), CORPUS, ids=[str(i) for i in range(len(CORPUS))])
def test_a_secret_split_across_two_output_pieces_is_still_caught(printed: str, secret: str) -> None:
    text = f"before\n{printed}\nafter\n"
    at = text.index(secret) + len(secret) // 2
    for pieces in ([text[:at], text[at:]], [text[: at - 3], text[at - 3 : at + 2], text[at + 2 :]]):
        stream = StreamRedactor()
        out: list[bytes] = []
        for n, piece in enumerate(pieces, 1):
            out += stream.feed(_frame(n, piece))
        out += stream.flush()
        assert [int(m.split(b"\n", 1)[0][4:]) for m in out] == list(range(1, len(pieces) + 1))
        joined = _texts(out)
        assert not _leaks(joined, secret), joined
        assert joined.startswith("before\n") and joined.endswith("after\n")


def test_events_between_two_pieces_wait_behind_the_held_one_and_an_end_lets_it_go() -> None:
    stream = StreamRedactor()
    assert stream.feed(_frame(1, "token: ghp_Zx81Qw")) == [] and stream.held
    status = b'id: 2\nevent: status\ndata: {"seq":2,"type":"status","state":"working"}'
    assert stream.feed(status) == []  # it waits behind the held piece, in order
    out = stream.feed(_frame(3, "ErTyUiOpAsDfGhJkLzXcVbNm123456\n"))
    assert [m.split(b"\n", 1)[0] for m in out] == [b"id: 1", b"id: 2", b"id: 3"] and out[1] == status
    assert _texts([out[0], out[2]]) == "token: [redacted: GitHub token, 33-64 chars]\n"
    assert stream.feed(_frame(4, "progress 10%")) == []
    ended = b'id: 5\nevent: tool_ended\ndata: {"seq":5,"type":"tool_ended","call_id":"c-1"}'
    out = stream.feed(ended)
    assert out == [_frame(4, "progress 10%"), ended] and not stream.held  # unchanged bytes
    plain = _frame(6, "def f(password):\n    return hash(password)\n")
    assert stream.feed(plain) == [plain]


def test_an_exports_jsonl_pieces_are_redacted_as_a_stream_and_text_pieces_whole() -> None:
    key = "AKIA" + _pick(UP + DIG, 16)
    lines = [
        json.dumps({"seq": 1, "type": "text", "turn_id": "t", "text": "id=" + key[:9]}) + "\n",
        json.dumps({"seq": 2, "type": "text", "turn_id": "t", "text": key[9:] + "\n"}) + "\n",
    ]
    redactor = PieceRedactor("jsonl")
    out = [p for line in lines for p in redactor.feed(line)] + redactor.flush()
    assert len(out) == 2 and all(json.loads(p)["seq"] for p in out) and key not in "".join(out)
    assert key[9:] not in "".join(out) and "[redacted: AWS key, 17-32 chars]" in "".join(out)
    assert PieceRedactor("text").feed(f"· turn 1\n{key}\n") == [
        "· turn 1\n[redacted: AWS key, 17-32 chars]\n"
    ]


def test_a_notice_for_a_webhook_quotes_no_secret() -> None:
    key = "AKIA" + _pick(UP + DIG, 16)
    notice = Notice(key="k", event="turn_ended", session_id="0" * 16, title="t", body=f"AWS {key}\nsee it")
    clean = redacted(notice)
    assert key not in json.dumps(clean.as_json()) and "[redacted: AWS key, 17-32 chars]" in clean.body
    assert redacted(Notice(key="k", event="e", session_id="0" * 16, title="t", body="fine")).body == "fine"


def test_tui_acp_redact_tells_the_editor_no_secret_and_without_it_every_byte() -> None:
    from tui.editor.shapes import Shaper
    from tui.protocol import TextChunk

    key = "AKIA" + _pick(UP + DIG, 16)
    event = TextChunk(seq=5, turn_id="t-1", text=f"id={key}\n")
    told = "".join(u.model_dump_json() for u in Shaper(redact=True).updates(event))
    assert key not in told and "[redacted: AWS key, 17-32 chars]" in told
    assert key in "".join(u.model_dump_json() for u in Shaper().updates(event))
    # A piece ending mid-line waits for the rest of its line; nothing comes: it goes as it is.
    shaper = Shaper(redact=True)
    assert shaper.updates(TextChunk(seq=6, turn_id="t-1", text="id=AKIA")) == [] and shaper.held
    assert "id=AKIA" in "".join(u.model_dump_json() for u in shaper.flush()) and not shaper.held
