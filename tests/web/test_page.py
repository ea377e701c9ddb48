"""The page of `tui web` in a real browser: Debian's chromium, headless, driven by Playwright.

Each test runs a real `tui web` and real workers; the browser opens the sign-in link that
`tui web` or `tui share` printed, as a person would.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import httpx
import pytest
from fake_model_server import Call, FakeModelServer, Text
from helpers import TIMEOUT

from tui.store import StatePaths
from tui.store.sidecar import read_sidecar

from .conftest import CHROMIUM, DESKTOP, PHONE, WAIT, Web, start_web, until_event, wake

if not Path(CHROMIUM).exists():
    pytest.skip("chromium is not installed (apt-get install chromium)", allow_module_level=True)
pytest.importorskip("playwright.sync_api", reason="playwright is missing: pip install -e .[test]")


def _share(web: Web, sid: str, *args: str) -> str:
    """`tui share SID ARGS`, as the owner types it; the browser link it printed."""
    env = {**os.environ, "TUI_STATE_DIR": str(web.state)}
    command = [sys.executable, "-m", "tui", "share", sid, *args]
    out = subprocess.run(command, env=env, capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    return next(ln for ln in out.stdout.splitlines() if "in a browser" in ln).split()[-1]


def _turn(web: Web, sid: str, prompt: str) -> None:
    reply = web.client().post(f"/api/sessions/{sid}/turn", json={"prompt": prompt})
    assert reply.status_code == 202, reply.text


def _model_session(web: Web) -> str:
    made = web.client().post("/api/sessions", json={"model": "local", "wait": TIMEOUT})
    assert made.status_code == 201, made.text
    sid: str = made.json()["id"]
    return sid


def test_a_guest_on_a_phone_watches_a_reply_stream_and_answers_its_question(
    web: Web, model_server: FakeModelServer, page_of: Any
) -> None:
    sid = _model_session(web)
    link = _share(web, sid, "--name", "ana", "--kind", "collaborator")
    page = page_of(PHONE)
    page.goto(link)
    page.wait_for_selector("#prompt")
    assert "#code=" not in page.url  # the code left the address bar once used
    model_server.script(
        Call("ask_user", {"question": "Which colour?", "options": ["red", "blue"]}, text="Let me **ask**.\n"),
        Text(["You ", "chose ", "*blue*."], delay=0.05, finish="length"),  # cut at its token limit
    )
    # the owner, in a terminal, follows the same session through the same tui web
    owner = httpx.Client(base_url=web.url, headers={"Authorization": f"Bearer {web.token}"}, timeout=TIMEOUT)
    web.clients.append(owner)
    at = owner.get(f"/api/sessions/{sid}/transcript").json()["cursor"]
    _turn(web, sid, "pick a colour")
    page.wait_for_selector("#transcript strong:has-text('ask')")  # the reply streamed, as Markdown
    page.wait_for_selector("#question button:has-text('blue')").tap()
    page.wait_for_selector(".line.answered:has-text('answered by ana (participant): blue')")
    page.wait_for_selector("#transcript em:has-text('blue')")
    page.wait_for_selector(".turn .outcome.completed")
    resolved = _first_event(owner, f"/api/sessions/{sid}/events", at, "question_resolved")
    assert resolved["by"] == {"kind": "participant", "name": "ana"}
    assert resolved["selected"] == ["blue"] and resolved["client_id"].startswith("page:")
    shown = subprocess.run(
        [sys.executable, "-m", "tui", "transcript", sid],
        env={**os.environ, "TUI_STATE_DIR": str(web.state)},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert "answered by ana (participant): blue" in shown.stdout, shown.stdout
    # the stop reason, in the words the terminal and `tui transcript` say it
    cut = "the reply was cut at the model's token limit"
    assert cut in shown.stdout, shown.stdout
    page.wait_for_selector(f'.turn .line.note:text-is("{cut}")')


def _first_event(client: httpx.Client, path: str, cursor: int, kind: str) -> dict[str, Any]:
    """The first event of `kind` after `cursor` on an event stream (read as SSE, line by line)."""
    with client.stream("GET", path, params={"cursor": cursor}) as r:
        assert r.status_code == 200
        event = ""
        for line in r.iter_lines():
            if line.startswith("event:"):
                event = line.split(":", 1)[1].strip()
            elif line.startswith("data:") and event == kind:
                found: dict[str, Any] = json.loads(line.split(":", 1)[1])
                return found
    raise AssertionError(f"no {kind} event")


def _worker_pid(state: Path, sid: str) -> int:
    car = read_sidecar(StatePaths(state).session(sid).sidecar)
    assert car is not None, "no live worker"
    return car.pid


def test_a_killed_worker_and_a_restarted_tui_web_lose_nothing_on_the_page(
    state_dir: Path, page_of: Any
) -> None:
    web = start_web(state_dir)
    try:
        sid = web.session()
        wake(web, sid)
        page = page_of(PHONE)
        page.goto(web.link)
        page.wait_for_selector("#newsession")
        page.goto(f"{web.url}/#s={sid}")
        page.wait_for_selector("#prompt")
        _turn(web, sid, "import time\nfor i in range(3):\n    print('step', i)\ntime.sleep(600)")
        page.wait_for_selector("#transcript :text('step 2')")
        os.kill(_worker_pid(state_dir, sid), signal.SIGKILL)  # mid-turn
        # the page starts a new worker, which ends the killed turn failed
        page.wait_for_selector(".turn .outcome.failed")
        port = web.url.rsplit(":", 1)[1]
        assert web.stop() == 0
        web = start_web(state_dir, "--port", port)
        wake(web, sid)  # the test's stop of tui web stopped the workers too
        _turn(web, sid, "print('after', 'restart')")
        page.wait_for_selector("#transcript :text('after restart')")
        page.wait_for_selector(".turn:nth-of-type(2) .outcome.completed")
        text = page.inner_text("#transcript")
        for line in ("step 0", "step 1", "step 2", "after restart"):
            assert text.count(line) == 1, (line, text)
        assert [n.inner_text() for n in page.query_selector_all(".turn .num")] == ["#1", "#2"]
    finally:
        web.stop()


def test_a_viewers_page_has_no_prompt_and_no_answer_buttons(web: Web, page_of: Any) -> None:
    sid = web.session()
    wake(web, sid)
    link = _share(web, sid, "--name", "vic", "--kind", "viewer")
    page = page_of(PHONE)
    page.goto(link)
    page.wait_for_selector("#transcript")
    _turn(web, sid, "x = ask('Go on?', options=['yes', 'no'])")
    page.wait_for_selector("#question .qtext:has-text('Go on?')")
    assert page.query_selector("#prompt") is None and page.query_selector("#composer") is None
    assert page.query_selector_all("#question button") == []
    assert "a viewer cannot answer" in page.inner_text("#question")


def test_a_participant_s_search_finds_only_in_the_session_shared_and_opens_the_turn(
    web: Web, page_of: Any
) -> None:
    owner = web.client()
    mine, other = web.session(), web.session()
    for sid in (mine, other):
        wake(web, sid)
        _turn(web, sid, "print('platy' + 'pus')")
        until_event(owner, f"/api/sessions/{sid}", 0, "turn_ended")
    assert {h["session_id"] for h in owner.get("/api/search", params={"q": "platypus"}).json()["hits"]} == {
        mine,
        other,
    }
    page = page_of(PHONE)
    page.goto(_share(web, mine, "--name", "vic", "--kind", "viewer"))
    page.wait_for_selector("#transcript")
    page.fill("#q", "platypus")
    page.press("#q", "Enter")
    page.wait_for_selector(".hit mark:has-text('platypus')")
    assert [s.inner_text() for s in page.query_selector_all(".hit .sid")] == [mine[:8]]
    page.click(".hit .open")
    page.wait_for_selector("article.turn.found[data-number='1']")


HOSTILE = (
    "<script>window.pwned = 'script'</script>\n"
    '<img src="x" onerror="window.pwned = \'img\'">\n'
    "[click me](javascript:window.pwned='link')\n"
    "<a href=\"javascript:window.pwned='a'\">raw link</a>\n"
    '<b onmouseover="window.pwned=\'b\'">raw html</b> <iframe src="javascript:alert(1)"></iframe>\n'
)


def test_nothing_a_program_or_an_agent_prints_runs_in_the_page(
    web: Web, model_server: FakeModelServer, page_of: Any
) -> None:
    python = web.session()
    wake(web, python)
    model = _model_session(web)
    page = page_of(DESKTOP)
    page.goto(web.link)
    page.wait_for_selector("#newsession")
    for sid in (python, model):
        page.goto(f"{web.url}/#s={sid}")
        page.wait_for_selector("#prompt")
        if sid == model:
            model_server.script(Text(["# Title\n\n", HOSTILE, "\n**done**"]))
            _turn(web, sid, "say it")
            page.wait_for_selector("#transcript h1:has-text('Title')")  # Markdown is rendered…
        else:
            _turn(web, sid, f"print({HOSTILE!r})")
        page.wait_for_selector(".turn .outcome.completed")
        shown = page.inner_text("#transcript .steps")
        assert "<script>window.pwned = 'script'</script>" in shown  # …and HTML shows as text
        assert "onerror" in shown and "javascript:" in shown
        for tag in ("script", "img", "iframe", "b", "a[href^='javascript']"):
            assert page.query_selector_all(f"#transcript {tag}") == [], tag
        for link in page.query_selector_all("#transcript a"):
            assert link.get_attribute("href", timeout=WAIT).startswith(("http:", "https:", "mailto:"))
        page.hover("#transcript .steps")
        assert page.evaluate("window.pwned") is None
    # and the page's own policy would stop an inline script even if one got in
    policy = httpx.get(web.url + "/").headers["content-security-policy"]
    assert "script-src 'self'" in policy and "unsafe-inline" not in policy


def test_the_page_fits_a_phone_and_enter_sends_shift_enter_breaks_a_line(web: Web, page_of: Any) -> None:
    sid = web.session()
    wake(web, sid)
    page = page_of(PHONE)
    page.goto(web.link)
    page.wait_for_selector("#newsession")
    page.click(f"a[href='#s={sid}']")
    box = page.wait_for_selector("#prompt")
    box.type("x = 1")
    box.press("Shift+Enter")
    box.type("print('sum', x + 1)")
    assert page.input_value("#prompt") == "x = 1\nprint('sum', x + 1)"
    box.press("Enter")
    page.wait_for_selector("#transcript :text('sum 2')")
    assert page.input_value("#prompt") == ""
    width = page.evaluate("document.documentElement.scrollWidth")
    assert width <= PHONE["width"], width  # nothing wider than the phone
    status = page.inner_text("#status")
    # a python session spends no tokens, so its row names none (it said "tokens 0 in / 0 out")
    assert "python" in status and "idle" in status and "tokens" not in status


def test_revoking_the_share_ends_the_pages_stream_and_the_page_says_so(web: Web, page_of: Any) -> None:
    sid = web.session()
    wake(web, sid)
    link = _share(web, sid, "--name", "rex", "--kind", "collaborator")
    page = page_of(PHONE)
    page.goto(link)
    page.wait_for_selector("#prompt")
    page.wait_for_selector("#status .here:has-text('rex')")  # its stream is open: the worker counts it
    revoked = subprocess.run(
        [sys.executable, "-m", "tui", "share", "revoke", sid, "--participant", "rex"],
        env={**os.environ, "TUI_STATE_DIR": str(web.state)},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert revoked.returncode == 0, revoked.stderr
    page.wait_for_selector("#banner:has-text('This share was revoked')")
    assert page.query_selector("#prompt") is None


NOTIFICATIONS = """
window.__notes = [];
window.Notification = class { constructor(title, o) { window.__notes.push(title + ' | ' + (o && o.body)); } };
window.Notification.permission = 'granted';
window.Notification.requestPermission = async () => 'granted';
Object.defineProperty(document, 'hidden', { get: () => true });
"""


def test_a_hidden_tab_is_notified_when_a_question_waits_and_when_a_turn_ends(web: Web, page_of: Any) -> None:
    sid = web.session()
    wake(web, sid)
    page = page_of(DESKTOP)
    page.add_init_script(NOTIFICATIONS)  # the tab hidden, notifications allowed
    page.goto(web.link)
    page.wait_for_selector("#newsession")
    page.goto(f"{web.url}/#s={sid}")
    page.wait_for_selector("#prompt")
    _turn(web, sid, "x = ask('Deploy now?', options=['yes', 'no'])")
    page.wait_for_selector("#question button:has-text('yes')").click()
    page.wait_for_selector(".turn .outcome.completed")
    notes = page.evaluate("window.__notes")
    assert notes[0] == f"A question waits in session {sid[:8]} | Deploy now?"
    assert notes[1].startswith(f"Turn #1 completed in session {sid[:8]}")


def test_tui_web_serves_the_page_over_tls_with_a_secure_cookie(state_dir: Path) -> None:
    if shutil.which("openssl") is None:
        pytest.skip("openssl is not installed (apt-get install openssl)")
    cert, key = state_dir / "cert.pem", state_dir / "key.pem"
    subject = ["-subj", "/CN=127.0.0.1", "-keyout", str(key), "-out", str(cert)]
    subprocess.run(
        ["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1", *subject],
        check=True,
        capture_output=True,
        timeout=60,
    )
    web = start_web(state_dir, "--tls-cert", str(cert), "--tls-key", str(key))
    try:
        assert web.url.startswith("https://") and web.link.startswith(web.url + "/#code=")
        b = httpx.Client(base_url=web.url, verify=False, timeout=TIMEOUT)
        web.clients.append(b)
        assert "tui" in b.get("/").text
        code = web.link.split("#code=")[1]
        signed = b.post("/api/signin", json={"code": code}, headers={"X-Tui-Page": "1", "Origin": web.url})
        assert signed.status_code == 200, signed.text
        assert "secure" in {part.strip().lower() for part in signed.headers["set-cookie"].split(";")}
    finally:
        web.stop()


def test_the_owners_list_marks_a_waiting_question_and_who_is_here_and_starts_a_session(
    web: Web, page_of: Any, tmp_path: Path
) -> None:
    sid = web.session()
    wake(web, sid)
    _turn(web, sid, "x = ask('Ready? <b>go</b>')")
    # a follower in another terminal
    follower = web.client().stream("GET", f"/api/sessions/{sid}/events", params={"client_id": "tui:box:1"})
    with follower as follow:
        assert follow.status_code == 200
        page = page_of(PHONE)
        page.goto(web.link)
        row = page.wait_for_selector(f".row:has(a[href='#s={sid}'])")
        page.wait_for_selector(f".row:has(a[href='#s={sid}']) .badge:has-text('question waiting')")
        page.wait_for_selector(f".row:has(a[href='#s={sid}']) .here:has-text('here:')")
        assert str(web.state) in row.inner_text()
        title = row.wait_for_selector(".stitle")  # beside the short id, as text (never HTML)
        assert title.text_content() == "x = ask('Ready? <b>go</b>')" and row.query_selector("b") is None
    page.fill("#newsession input[name=folder]", str(tmp_path))
    page.fill("#newsession input[name=agent]", "python")
    page.click("#newsession button[type=submit]")
    page.wait_for_selector("#prompt")
    new = page.url.split("#s=")[1]
    assert new != sid
    shown = web.client().get(f"/api/sessions/{new}").json()
    assert shown["folder"] == str(tmp_path) and shown["agent"] == "python"


def test_older_turns_load_when_the_view_reaches_its_top(web: Web, page_of: Any) -> None:
    sid = web.session()
    wake(web, sid)
    c = web.client()
    for n in range(1, 26):
        queued = {"prompt": f"print('turn {n}')", "delivery": "queue"}
        reply = c.post(f"/api/sessions/{sid}/turn", json=queued)
        assert reply.status_code == 202, reply.text
    page = page_of(DESKTOP)
    page.goto(web.link)
    page.wait_for_selector("#newsession")
    page.goto(f"{web.url}/#s={sid}")
    page.wait_for_selector("#transcript :text('turn 25')")
    assert len(page.query_selector_all(".turn")) < 25  # one page of turns at first
    page.eval_on_selector("#transcript", "t => t.scrollTop = 0")
    page.wait_for_selector(".turn .num:text-is('#1')")
    nums = [n.inner_text() for n in page.query_selector_all(".turn .num")]
    assert nums == [f"#{n}" for n in range(1, 26)]


def test_a_question_of_several_choices_or_free_text_is_answered_from_the_page(web: Web, page_of: Any) -> None:
    sid = web.session()
    wake(web, sid)
    page = page_of(PHONE)
    page.goto(web.link)
    page.wait_for_selector("#newsession")
    page.goto(f"{web.url}/#s={sid}")
    page.wait_for_selector("#prompt")
    several = "ask('Which?', options=['a', 'b', 'c'], multiple=True, freeform=False)"
    _turn(web, sid, f"picked = {several}\nprint(picked)")
    page.wait_for_selector("#question input[value=a]").check()
    page.check("#question input[value=c]")
    assert page.query_selector("#question .freeform") is None
    page.click("#question button:has-text('Answer')")
    page.wait_for_selector(".line.answered:has-text('answered by') >> text=a, c")
    page.wait_for_selector("#transcript :text(\"['a', 'c']\")")
    # The call's card says the question and its options, as the terminal's line does.
    card = page.wait_for_selector(".tool .tname:has-text('ask: Which?')")
    assert card.inner_text() == "ask: Which? · a / b / c (several)"
    _turn(web, sid, "print('hello', ask('Your name?'))")
    page.wait_for_selector("#question .freeform").fill("Ada")
    page.press("#question .freeform", "Enter")
    page.wait_for_selector("#transcript :text('hello Ada')")
    assert page.query_selector("#question").is_hidden()


def test_queue_interrupt_and_resume_from_the_page(web: Web, page_of: Any) -> None:
    sid = web.session()
    wake(web, sid)
    page = page_of(PHONE)
    page.goto(web.link)
    page.wait_for_selector("#newsession")
    page.goto(f"{web.url}/#s={sid}")
    box = page.wait_for_selector("#prompt")
    box.fill("import time\nprint('long one')\ntime.sleep(600)")
    page.click("#send")
    page.wait_for_selector("#transcript :text('long one')")
    box.fill("print('queued one')")
    page.click("#queue-btn")
    page.wait_for_selector("#queue .queued:has-text(\"print('queued one')\")")
    page.click("#interrupt")
    page.wait_for_selector(".turn .outcome.interrupted")
    page.wait_for_selector("#queue .qhead:has-text('held')")  # a queue waits after an interrupt
    box.fill("/resume")
    box.press("Enter")
    page.wait_for_selector("#transcript :text-is('queued one')")
    page.wait_for_selector(".turn:nth-of-type(2) .outcome.completed")
    assert page.query_selector("#queue").is_hidden()


def test_a_participants_prompt_typed_while_the_session_works_is_queued_by_the_worker_then_runs(
    web: Web, page_of: Any
) -> None:
    """The page hands its prompt over with no now-or-queue choice of its own (``delivery: auto``):
    the worker queues it behind the owner's running turn; it runs next, as the participant's."""
    app_js = (Path(__file__).parents[2] / "tui/web/static/app.js").read_text()
    assert "working ?" not in app_js and "this.working" not in app_js  # the page decides nothing
    sid = web.session()
    wake(web, sid)
    link = _share(web, sid, "--name", "ana", "--kind", "collaborator")
    page = page_of(PHONE)
    sent: list[dict[str, Any]] = []
    page.on(
        "request",
        lambda r: sent.append(r.post_data_json) if r.method == "POST" and r.url.endswith("/turn") else None,
    )
    page.goto(link)
    box = page.wait_for_selector("#prompt")
    _turn(web, sid, "x = ask('go on?')")  # the owner's turn: it works until answered
    page.wait_for_selector("#question:has-text('go on?')")
    box.fill("print('from ana')")
    box.press("Enter")
    page.wait_for_selector("#queue .queued:has-text(\"print('from ana')\")")
    assert [b["delivery"] for b in sent] == ["auto"]
    owner = web.client()
    question = owner.get(f"/api/sessions/{sid}/transcript").json()["question"]
    answered = owner.post(
        f"/api/sessions/{sid}/answer", json={"question_id": question["question_id"], "freeform": "y"}
    )
    assert answered.status_code == 200, answered.text
    page.wait_for_selector("#transcript :text-is('from ana')")
    ran = page.wait_for_selector(".turn:has(pre.prompt:text-is(\"print('from ana')\"))")
    by = ran.query_selector(".by")
    assert by is not None and "ana (participant)" in by.inner_text()
    assert page.query_selector("#queue").is_hidden()
    turns = owner.get(f"/api/sessions/{sid}/transcript").json()["turns"]
    mine = next(t for t in turns if t["prompt"] == "print('from ana')")
    assert mine["by"] == {"kind": "participant", "name": "ana"}


def test_signing_out_ends_the_pages_cookie(web: Web, page_of: Any) -> None:
    page = page_of(PHONE)
    page.goto(web.link)
    page.wait_for_selector("#newsession")
    assert page.evaluate("document.cookie") == ""  # HttpOnly: no script of the page can read it
    page.click("#signout")
    page.wait_for_selector("#banner:has-text('Signed out')")
    page.reload()
    page.wait_for_selector("#main .hint:has-text('sign-in link')")
    assert page.query_selector("#newsession") is None


def test_turns_a_rewind_undid_show_as_rewound_on_the_open_page_at_once(
    state_dir: Path, tmp_path: Path, page_of: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    if shutil.which("git") is None:
        pytest.skip("checkpoints need git")
    monkeypatch.setenv("TUI_CHECKPOINTS", "on")
    folder = tmp_path / "work"
    folder.mkdir()
    web = start_web(state_dir)
    try:
        sid = web.session(folder=str(folder))
        wake(web, sid)
        page = page_of(DESKTOP)
        page.goto(web.link)
        page.wait_for_selector("#newsession")
        page.goto(f"{web.url}/#s={sid}")
        page.wait_for_selector("#transcript")
        for n in (1, 2, 3):
            _turn(web, sid, f"open('f{n}.txt', 'w').write('{n}')")
            page.wait_for_selector(f".turn[data-number='{n}'] .outcome.completed")
        assert page.query_selector_all(".outcome.rewound") == []
        env = {**os.environ, "TUI_STATE_DIR": str(state_dir)}
        rewind = [sys.executable, "-m", "tui", "rewind", sid, "--to", "2"]
        out = subprocess.run(rewind, env=env, capture_output=True, text=True, timeout=TIMEOUT)
        assert out.returncode == 0, out.stderr
        # The page open all along marks turns 2 and 3 as the rewind's event arrives, no reload.
        page.wait_for_selector(".turn[data-number='3'] .outcome.rewound")
        page.wait_for_selector(".turn[data-number='2'] .outcome.rewound")
        assert page.query_selector(".turn[data-number='1'] .outcome.rewound") is None
        assert sorted(p.name for p in folder.iterdir()) == ["f1.txt"]
        # The rewind's line stays where the rewind happened once the next turn runs: after the
        # turns it undid, above the next turn's header (not under it).
        _turn(web, sid, "print('after')")
        page.wait_for_selector(".turn[data-number='4'] .outcome.completed")
        order = page.eval_on_selector_all(
            "#transcript .turn .head, #transcript .line",
            "ns => ns.map(n => n.classList.contains('head') ? n.innerText.split(/\\s/)[0] : n.innerText)",
        )
        said = next(n for n, text in enumerate(order) if text.startswith("rewound to before turn 2"))
        assert order.index("#3") < said < order.index("#4"), order
    finally:
        web.stop()
