"""Secrets taken out of what leaves the owner's own view: ``[redacted: AWS key, 17-32 chars]`` in
their place (its kind, and its length as a class, not the length itself).

The rules are detect-secrets' plugins (its maintained detectors of cloud keys, tokens, private
keys, passwords in URLs and secret-sounding assignments), run on the text itself: no network
check, no baseline. Two rules are left out: the high-entropy string detectors (they flag every
hash and id in quotes, and a journal line is all quoted ids) and public IP addresses (not a
secret). A private key is taken out from its ``BEGIN`` line to its ``END`` line (to the end of the
text or the JSON string when that is not there yet), not only the line detect-secrets names.

`redact` takes text, `redact_json` a JSON document (its strings, keys kept), `redact_frame` one
SSE message of an event stream; `StreamRedactor` the event stream of a session, holding back a
chunk whose text ends mid-line until the next piece of the same output comes (or a moment
passes), so a secret printed in two pieces is still caught.
"""

from __future__ import annotations

import json
import re
import threading
from collections.abc import Iterable, Iterator
from typing import Any

__all__ = [
    "HOLD",
    "PieceRedactor",
    "StreamRedactor",
    "find",
    "frame_data",
    "length_class",
    "load_rules",
    "mark",
    "redact",
    "redact_frame",
    "redact_json",
    "redact_pieces",
]

HOLD = 1.0
"""Seconds at most an output chunk that ends mid-line is held back for the rest of its line (it
goes as soon as the next piece of the same output comes, usually within milliseconds)."""
BEHIND = 64
"""Other events at most kept waiting behind a held chunk (then it goes as it is)."""
_ENDS = re.compile(rb"event: (?:tool_ended|turn_ended|worker_leaving|question_asked)\n")
CARRY = 4096
"""Characters of a partial line carried into the next piece at most (a longer one goes as is)."""

_LABELS = {
    "AWS Access Key": "AWS key",
    "Private Key": "private key",
    "Secret Keyword": "secret",
    "Basic Auth Credentials": "password in URL",
    "JSON Web Token": "JWT",
    "GitHub Token": "GitHub token",
    "GitLab Token": "GitLab token",
    "Slack Token": "Slack token",
    "Stripe Access Key": "Stripe key",
    "OpenAI Token": "OpenAI key",
    "Azure Storage Account access key": "Azure key",
    "Twilio API Key": "Twilio key",
}
_SKIPPED = {"Base64HighEntropyString", "HexHighEntropyString", "IPPublicDetector"}
_KEY_START = re.compile(r"-----BEGIN[A-Z0-9 ]*PRIVATE KEY[A-Z ]*-----|PuTTY-User-Key-File-2")
_KEY_END = re.compile(r"-----END[A-Z0-9 ]*PRIVATE KEY[A-Z ]*-----")
_KEYWORDS = ("key", "pass", "pwd", "secret", "contrase")
"""A substring every keyword of detect-secrets' keyword rule holds (``api_?key``, ``passwd``,
``secret``, ``contraseña`` …): a line with none of them cannot match it, and is not run through
its costly expressions."""
_LINES = re.compile(r"\n|\\n|\\r")


class _Rules:
    """detect-secrets' detectors, made once (importing them costs about 50 ms)."""

    def __init__(self) -> None:
        from detect_secrets.core.plugins.util import get_mapping_from_secret_type_to_class
        from detect_secrets.plugins.keyword import CONFIG_DENYLIST_REGEX_TO_GROUP, KeywordDetector
        from detect_secrets.plugins.private_key import PrivateKeyDetector

        self.regex: list[tuple[str, re.Pattern[str]]] = []
        self.keyword = KeywordDetector()
        self.keyword_groups = CONFIG_DENYLIST_REGEX_TO_GROUP
        plugins: dict[str, type[Any]] = get_mapping_from_secret_type_to_class()
        for secret_type, plugin in sorted(plugins.items()):
            if plugin.__name__ in _SKIPPED or plugin in (KeywordDetector, PrivateKeyDetector):
                continue
            label = _LABELS.get(secret_type, secret_type)
            self.regex.extend((label, pattern) for pattern in getattr(plugin, "denylist", ()))


_rules: _Rules | None = None
_making = threading.Lock()


def _get_rules() -> _Rules:
    global _rules
    if _rules is None:
        with _making:
            if _rules is None:
                _rules = _Rules()
    return _rules


def load_rules() -> None:
    """Make the detectors now rather than at the first redaction: a server calls it in a thread
    before a stream's first event would wait for them (100-300 ms on a loaded machine)."""
    _get_rules()


def find(text: str) -> list[tuple[int, int, str]]:
    """The secrets in `text`: ``(start, end, label)``, in order, not overlapping."""
    rules = _get_rules()
    spans: list[tuple[int, int, str]] = []
    for m in _KEY_START.finditer(text):
        end = _KEY_END.search(text, m.end())
        if end is not None:
            stop = end.end()
        else:
            quote = text.find('"', m.end())
            stop = len(text) if quote < 0 else quote
        spans.append((m.start(), stop, "private key"))
    values: list[tuple[str, str]] = []
    for label, pattern in rules.regex:
        for m in pattern.finditer(text):
            # A rule whose group is the secret itself (``aws ... key = "…"``) names the group;
            # one whose group is only a prefix (``(ghp|gho)_…``) names the whole match.
            group = max(range(1, (pattern.groups or 0) + 1), key=lambda g: len(m.group(g) or ""), default=0)
            if group and len(m.group(group) or "") < 8:
                group = 0
            if m.end(group) - m.start(group) >= 6:
                spans.append((m.start(group), m.end(group), label))
    lowered = text.lower()
    for line in _LINES.split(text) if any(word in lowered for word in _KEYWORDS) else ():
        if ("=" in line or ":" in line) and any(word in line.lower() for word in _KEYWORDS):
            for value in rules.keyword.analyze_string(line, denylist_regex_to_group=rules.keyword_groups):
                value = value.rstrip("\\\",';")
                if value and len(value) >= 4 and not value.startswith("[redacted"):
                    values.append((value, "secret"))
    for value, label in values:
        at = text.find(value)
        while at >= 0:
            spans.append((at, at + len(value), label))
            at = text.find(value, at + len(value))
    return _merge(text, spans)


_TOKEN_TAIL = re.compile(r"[A-Za-z0-9_\-+/=.]*")


def _tail_end(text: str, at: int) -> int:
    m = _TOKEN_TAIL.match(text, at)
    return at if m is None else m.end()


def _merge(text: str, spans: list[tuple[int, int, str]]) -> list[tuple[int, int, str]]:
    """The spans in order, each carried on to the end of the token it ends in (a rule that names
    only a token's start, as detect-secrets' JWT rule, takes the whole token), overlaps joined."""
    out: list[tuple[int, int, str]] = []
    spans = [(a, b if label == "private key" else _tail_end(text, b), label) for a, b, label in spans]
    for start, end, label in sorted(spans, key=lambda s: (s[0], -s[1])):
        if out and start < out[-1][1]:
            if end > out[-1][1]:
                out[-1] = (out[-1][0], end, out[-1][2])
            continue
        out.append((start, end, label))
    return out


def length_class(n: int) -> str:
    """How long a secret of `n` characters is, as a class a reader can weigh without learning its
    length: ``up to 8 chars``, then ranges doubling (``9-16``, ``17-32``, ``33-64`` … chars)."""
    if n <= 8:
        return "up to 8 chars"
    top = 16
    while n > top:
        top *= 2
    return f"{top // 2 + 1}-{top} chars"


def mark(label: str, n: int) -> str:
    """What a secret of kind `label` and `n` characters shows as: ``[redacted: LABEL, CLASS]``."""
    return f"[redacted: {label}, {length_class(n)}]"


def redact(text: str) -> str:
    """`text` with each secret replaced by ``[redacted: LABEL, LENGTH CLASS]`` (`mark`)."""
    spans = find(text)
    if not spans:
        return text
    parts: list[str] = []
    at = 0
    for start, end, label in spans:
        parts.append(text[at:start])
        parts.append(mark(label, end - start))
        at = end
    parts.append(text[at:])
    return "".join(parts)


_IDS = frozenset(
    {"seq", "at", "type", "turn_id", "call_id", "question_id", "client_id", "request_id", "queue_id", "id"}
)
"""Keys whose strings are tui's own ids and times, never output: not scanned."""


def _walk(value: Any) -> tuple[Any, bool]:
    """`value` with its strings' secrets replaced, and whether anything was."""
    if isinstance(value, str):
        if len(value) < 8:
            return value, False
        clean = redact(value)
        return clean, clean is not value
    if isinstance(value, list):
        items = [_walk(v) for v in value]
        return [v for v, _ in items], any(c for _, c in items)
    if isinstance(value, dict):
        changed = False
        out = {}
        for k, v in value.items():
            if k in _IDS:
                out[k] = v
                continue
            out[k], c = _walk(v)
            changed = changed or c
        return out, changed
    return value, False


def redact_json(raw: bytes) -> bytes:
    """A JSON document with each string's secrets replaced (its keys, and tui's own ids and
    times, as they are); `raw` itself when it has none, or redacted as text when it is not JSON."""
    try:
        doc = json.loads(raw)
    except ValueError:
        text = raw.decode("utf-8", "replace")
        clean = redact(text)
        return raw if clean is text else clean.encode()
    out, changed = _walk(doc)
    if not changed:
        return raw
    return json.dumps(out, ensure_ascii=False, separators=(",", ":")).encode()


def _split(message: bytes) -> tuple[bytes, bytes, bytes] | None:
    """An SSE message as (its lines before ``data:``, the data, what follows); None: no data."""
    at = message.find(b"data: ")
    if at < 0 or (at > 0 and message[at - 1 : at] != b"\n"):
        return None
    end = message.find(b"\n", at)
    end = len(message) if end < 0 else end
    return message[: at + 6], message[at + 6 : end], message[end:]


def redact_frame(message: bytes) -> bytes:
    """One SSE message (``id:``/``event:``/``data:`` lines) with its data's secrets replaced."""
    parts = _split(message)
    if parts is None:
        return message
    head, data, tail = parts
    clean = redact_json(data)
    return message if clean is data else head + clean + tail


_CHUNKS = {b"text", b"thinking", b"tool_output"}


def _chunk_of(message: bytes) -> tuple[dict[str, Any], tuple[str, str, str]] | None:
    """A text, thinking or tool output event's JSON and the output it belongs to, else None."""
    at = message.find(b"\nevent: ")
    if at < 0:
        return None
    end = message.find(b"\n", at + 1)
    if message[at + 8 : end] not in _CHUNKS:
        return None
    parts = _split(message)
    if parts is None:
        return None
    try:
        doc = json.loads(parts[1])
    except ValueError:
        return None
    if not isinstance(doc, dict) or not isinstance(doc.get("text"), str):
        return None
    return doc, (str(doc.get("type")), str(doc.get("turn_id")), str(doc.get("call_id", "")))


def _in_key(text: str) -> bool:
    """Whether `text` ends inside a private key (its last ``BEGIN`` has no ``END`` after it)."""
    starts = list(_KEY_START.finditer(text))
    return bool(starts) and _KEY_END.search(text, starts[-1].end()) is None


def _with_text(message: bytes, doc: dict[str, Any], text: str) -> bytes:
    parts = _split(message)
    assert parts is not None
    body = json.dumps({**doc, "text": text}, ensure_ascii=False, separators=(",", ":"))
    return parts[0] + body.encode() + parts[2]


class StreamRedactor:
    """A session's event stream, message by message, with its secrets replaced.

    A text, thinking or tool output chunk whose text ends mid-line is held (`held`) until the
    next message: when that is the same output's next chunk, the partial line moves into it and
    is redacted with it (the held chunk goes out with its whole lines); otherwise, or when
    `flush` is called (`HOLD` seconds later), it goes out as it is. Nothing else is held. A
    private key whose ``END`` line comes in a later chunk of the same output is taken out up to
    that line.
    """

    def __init__(self) -> None:
        self._held: tuple[bytes, dict[str, Any], tuple[str, str, str], str] | None = None
        self._behind: list[bytes] = []
        """Other events that came while a chunk is held: sent after it, in order."""
        self._keys: set[tuple[str, str, str]] = set()
        """The outputs now inside a private key."""

    @property
    def held(self) -> bytes | None:
        """The chunk held back, if any."""
        return None if self._held is None else self._held[0]

    def _clean(self, key: tuple[str, str, str], text: str) -> str:
        rest = ""
        if key in self._keys:
            end = _KEY_END.search(text)
            if end is None:
                return mark("private key", len(text)) if text else text
            self._keys.discard(key)
            rest, text = mark("private key", end.end()), text[end.end() :]
        if _in_key(text):
            self._keys.add(key)
        return rest + redact(text)

    def feed(self, message: bytes) -> list[bytes]:
        """The messages to send now, in order: `message` (without its blank line) among them, or
        held with what comes after a held chunk."""
        out: list[bytes] = []
        chunk = _chunk_of(message)
        carry = ""
        if self._held is not None:
            held, doc, key, own = self._held
            if chunk is None and len(self._behind) < BEHIND and not _ENDS.search(message[:60]):
                # Another event (a status) between two pieces of the output: it waits behind.
                self._behind.append(redact_frame(message))
                return out
            self._held = None
            text: str = doc["text"]
            if chunk is not None and chunk[1] == key:
                cut = text.rfind("\n") + 1
                if len(text) - cut <= CARRY:
                    # The partial line moves into the next piece (the text joined is the same).
                    carry = text[cut:]
                    text = text[:cut]
            out.append(self._out(held, doc, key, text, own))
            out += self._behind
            self._behind = []
        if chunk is None:
            out.append(redact_frame(message))
            return out
        doc, key = chunk
        text = carry + doc["text"]
        if text and not text.endswith("\n") and len(text) <= CARRY:
            self._held = (message, {**doc, "text": text}, key, doc["text"])
        else:
            out.append(self._out(message, doc, key, text, doc["text"]))
        return out

    def _out(
        self, message: bytes, doc: dict[str, Any], key: tuple[str, str, str], text: str, own: str
    ) -> bytes:
        """`message` (whose own text is `own`) with `text` redacted as its text; the same bytes
        when that changes nothing."""
        clean = self._clean(key, text)
        if clean == own:
            return message
        return _with_text(message, doc, clean)

    def flush(self) -> list[bytes]:
        """The held chunk, if any, to send now."""
        if self._held is None:
            return []
        held, doc, key, own = self._held
        self._held = None
        behind, self._behind = self._behind, []
        return [self._out(held, doc, key, doc["text"], own), *behind]


_TYPE = re.compile(r'"type":\s*"([a-z_]+)"')


class PieceRedactor:
    """An export's pieces (`tui.store.export`) with their secrets taken out: a text or markdown
    piece is a whole line or turn (a turn's output joined); a jsonl piece is one event, read as a
    stream is (`StreamRedactor`) so a secret split across two output events is still caught."""

    def __init__(self, fmt: str) -> None:
        self.fmt = fmt
        self._stream = StreamRedactor()
        self._n = 0

    def feed(self, piece: str) -> list[str]:
        """The pieces to write now."""
        if self.fmt != "jsonl":
            return [redact(piece)]
        self._n += 1
        m = _TYPE.search(piece)
        typ = m.group(1) if m else "unknown"
        message = b"id: %d\nevent: %s\ndata: %s" % (self._n, typ.encode(), piece.rstrip("\n").encode())
        return [_data(out) for out in self._stream.feed(message)]

    def flush(self) -> list[str]:
        """What is still held, at the end."""
        return [_data(out) for out in self._stream.flush()]


def frame_data(message: bytes) -> bytes:
    """The data of an SSE message that has one (as `StreamRedactor` gives them back)."""
    parts = _split(message)
    assert parts is not None
    return parts[1]


def _data(message: bytes) -> str:
    return frame_data(message).decode() + "\n"


def redact_pieces(pieces: Iterable[str], fmt: str) -> Iterator[str]:
    """`PieceRedactor` over an export's pieces."""
    redactor = PieceRedactor(fmt)
    for piece in pieces:
        yield from redactor.feed(piece)
    yield from redactor.flush()


def lines_changed(paths: Iterator[str]) -> tuple[int, int]:
    """Over the files named: how many lines `redact` would change, of how many (a measure of how
    much it takes out that is not a secret)."""
    changed = total = 0
    for path in paths:
        with open(path, encoding="utf-8", errors="replace") as f:
            for line in f:
                total += 1
                if redact(line) != line:
                    changed += 1
    return changed, total
