"""The plain commands on a terminal show the control characters a session holds, never send them;
piped, they keep every byte (issue 21). Real `tui` processes whose stdout and stderr are a pty."""

from __future__ import annotations

import os
import re
import select
import subprocess
import sys
import tempfile
from pathlib import Path

from client.helpers import TIMEOUT, tui

ESC, BEL = "\x1b", "\x07"
SEQUENCES = [
    f"{ESC}]52;c;cHduZWQ={BEL}",  # OSC 52, the clipboard, ended by BEL
    f"{ESC}]52;c;cHduZWQ={ESC}\\",  # ... and by ST
    f"{ESC}]0;PWNED{BEL}",  # OSC 0, the window title
    f"{ESC}]8;;http://evil.example/{ESC}\\click{ESC}]8;;{ESC}\\",  # OSC 8, a link
    f"{ESC}[2J",  # clear the screen
    f"{ESC}P1$r0m{ESC}\\",  # DCS
    "\x9b2J",  # the 8-bit CSI
    BEL,
]
PROGRAM = "\n".join(f"print('line{n}:' + {seq!r})" for n, seq in enumerate(SEQUENCES))
PRINTED = "".join(f"line{n}:{seq}\n" for n, seq in enumerate(SEQUENCES))

_ACTING = re.compile(r"\x1b\]|\x1bP|\x1b\[2J|\x07|[\x80-\x9f]")


def acting(written: bytes) -> str | None:
    """What in `written` would act on a terminal: OSC, DCS, a screen clear, BEL, a C1 control
    (a byte that is not UTF-8 fails the decoding)."""
    found = _ACTING.search(written.decode("utf-8"))
    return found.group() if found else None


def on_a_terminal(*args: str, script: str | None = None) -> tuple[int, bytes]:
    """``python -m tui ARGS`` with stdout and stderr on a new pty (stdin: `script` in a file, or
    nothing): its exit code and every byte it wrote there."""
    leader, follower = os.openpty()
    stdin = tempfile.TemporaryFile()  # noqa: SIM115 - closed below
    stdin.write((script or "").encode())
    stdin.seek(0)
    proc = subprocess.Popen(
        [sys.executable, "-m", "tui", *args],
        stdin=stdin,
        stdout=follower,
        stderr=follower,
        env=os.environ.copy(),
    )
    os.close(follower)
    got = bytearray()
    try:
        while True:
            ready, _, _ = select.select([leader], [], [], TIMEOUT)
            assert ready, f"tui {' '.join(args)} wrote nothing for {TIMEOUT} s"
            try:
                data = os.read(leader, 65536)
            except OSError:  # EIO: the command closed the terminal (it ended)
                break
            if not data:
                break
            got += data
        return proc.wait(TIMEOUT), bytes(got)
    finally:
        os.close(leader)
        stdin.close()
        if proc.poll() is None:
            proc.kill()


def test_send_wait_and_transcript_show_a_programs_escapes_on_a_terminal_and_keep_them_piped(
    state_dir: Path,
) -> None:
    piped = tui("send", "--new", PROGRAM, "--wait")
    assert piped.returncode == 0, piped.stderr
    assert piped.stdout == PRINTED  # piped: every byte as the program wrote it
    sid = piped.stderr.strip().splitlines()[0]

    code, shown = on_a_terminal("send", sid[:8], PROGRAM, "--wait")
    assert code == 0, shown
    assert acting(shown) is None, acting(shown)
    text = shown.decode()
    assert "line0:␛]52;c;cHduZWQ=␇" in text
    assert "line2:␛]0;PWNED␇" in text
    assert "line4:␛[2J" in text
    assert "line6:␛[2J" in text  # U+009B, the 8-bit CSI, is shown as what it stands for

    code, shown = on_a_terminal("transcript", sid[:8])
    assert code == 0, shown
    assert acting(shown) is None, acting(shown)
    assert "␛]52;c;cHduZWQ=␇" in shown.decode()
    assert ESC in tui("transcript", sid[:8]).stdout  # piped: as stored


def test_a_title_made_from_a_prompt_is_harmless_in_sessions(state_dir: Path) -> None:
    prompt = f"print('{ESC}]0;PWNED{BEL}{ESC}]52;c;cHduZWQ={BEL}{ESC}[2Jhi')"
    made = tui("send", "--new", prompt, "--wait")
    assert made.returncode == 0, made.stderr

    code, shown = on_a_terminal("sessions")
    assert code == 0, shown
    assert acting(shown) is None, acting(shown)
    assert "print('␛]0;PWNED␇␛]52;c;" in shown.decode()

    listed = tui("sessions")
    assert f"{ESC}]0;PWNED{BEL}" in listed.stdout  # piped: the bytes kept


def test_a_question_with_escapes_is_shown_on_a_terminal_by_send_and_answer(state_dir: Path) -> None:
    ask = f"x = ask('{ESC}]52;c;cHduZWQ={BEL}Proceed?', options=['{ESC}[2Jyes', 'no']); print(x)"
    code, shown = on_a_terminal("send", "--new", ask, "--wait")
    assert code == 3, shown
    assert acting(shown) is None, acting(shown)
    text = shown.decode()
    assert "␛]52;c;cHduZWQ=␇Proceed?" in text and "1. ␛[2Jyes" in text
    sid = next(line for line in text.splitlines() if re.fullmatch(r"[0-9a-f]{16}", line.strip())).strip()

    code, shown = on_a_terminal("answer", sid[:8], "--option", "1")
    assert code == 0, shown
    assert acting(shown) is None, acting(shown)
    assert "Proceed?' with ␛[2Jyes" in shown.decode()  # the question quoted, the option shown


def test_the_piped_surface_shows_escapes_when_its_stdout_is_a_terminal(state_dir: Path) -> None:
    made = tui("send", "--new", "print('ready')", "--wait")
    sid = made.stderr.strip().splitlines()[0]
    code, shown = on_a_terminal("attach", sid[:8], script=PROGRAM + "\n")
    assert code == 0, shown
    assert acting(shown) is None, acting(shown)
    assert "line0:␛]52;c;cHduZWQ=␇" in shown.decode()
    piped = tui("attach", sid[:8], input=PROGRAM + "\n")
    assert piped.returncode == 0, piped.stderr
    assert piped.stdout == PRINTED
