"""`tui acp`: an editor's ACP client (the `acp` package's own client side) on tui sessions."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import sys
from pathlib import Path

import acp
import httpx
import pytest
from acp import schema
from editor import editor
from fake_model_server import FakeModelServer, Text
from helpers import RUNS_UNTIL_STOPPED, wait_until

from client.helpers import sessions, tui, worker_pid
from tui.store import StatePaths


async def _tui(*args: str) -> tuple[int, str, str]:
    """``tui ARGS`` as another client, without blocking the editor's loop."""
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "tui",
        *args,
        stdin=asyncio.subprocess.DEVNULL,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        env=os.environ.copy(),
    )
    out, err = await proc.communicate()
    return proc.returncode or 0, out.decode(), err.decode()


async def test_a_turn_in_a_new_python_session(state_dir: Path, tmp_path: Path) -> None:
    async with editor() as ed:
        init = await ed.conn.initialize(protocol_version=acp.PROTOCOL_VERSION)
        caps = init.agent_capabilities
        assert caps.load_session and caps.prompt_capabilities.embedded_context
        sessions_ = caps.session_capabilities
        assert sessions_.list is not None and sessions_.resume is not None and sessions_.close is not None
        sid = str((await ed.conn.new_session(cwd=str(tmp_path))).session_id)
        answer = await ed.prompt(sid, "print(6 * 7)")
        assert answer.stop_reason == "end_turn"
        assert "42" in ed.said(sid)
        assert ed.said(sid, "user_message_chunk") == "", "the editor's own prompt is not said back"
        listed = await ed.conn.list_sessions(cwd=str(tmp_path))
        assert [s.session_id for s in listed.sessions] == [sid]
        assert (await ed.conn.list_sessions(cwd=str(tmp_path / "elsewhere"))).sessions == []
    [row] = sessions()
    assert row["id"] == sid and row["folder"] == str(tmp_path)
    assert row["live"], "closing the editor leaves the session running"
    shown = tui("transcript", sid)
    assert "print(6 * 7)" in shown.stdout and "42" in shown.stdout


async def test_a_turn_in_a_session_of_an_acp_agent(acp_tester: Path) -> None:
    (acp_tester / "notes.txt").write_text("first\n")
    async with editor("--agent", "tester") as ed:
        sid = await ed.new(acp_tester)
        answer = await ed.prompt(sid, "edit the notes")
        assert answer.stop_reason == "end_turn"
        assert "Working on: edit the notes" in ed.said(sid) and "Done." in ed.said(sid)
        assert "Thinking about it." in ed.said(sid, "agent_thought_chunk")
        [started] = ed.of(sid, "tool_call")
        assert started.title == "Edit notes.txt" and started.kind == "edit"
        updates = [u for u in ed.of(sid, "tool_call_update") if u.tool_call_id == started.tool_call_id]
        assert updates[-1].status == "completed"
        diffs = [c for u in updates for c in u.content or [] if isinstance(c, schema.FileEditToolCallContent)]
        assert diffs and diffs[-1].new_text == "hello from the agent\nfirst\n"
        plans = ed.of(sid, "plan")
        assert [e.status for e in plans[-1].entries] == ["completed", "completed"]
    assert (acp_tester / "notes.txt").read_text() == "hello from the agent\nfirst\n"
    assert sessions()[0]["agent"] == "tester"


async def test_load_replays_the_whole_session_then_follows_a_turn_sent_from_elsewhere(
    acp_tester: Path,
) -> None:
    (acp_tester / "notes.txt").write_text("first\n")
    made = tui("send", "--new", "--agent", "tester", "edit the notes", "--wait")
    assert made.returncode == 0, made.stderr
    sid = made.stderr.strip().splitlines()[0]
    async with editor() as ed:
        await ed.conn.initialize(protocol_version=acp.PROTOCOL_VERSION)
        await ed.conn.load_session(cwd=str(acp_tester), session_id=sid)
        # Before load answered, the whole history came: the prompt, who sent it, the reply, the
        # thought, the tool call with its updates, the plan.
        user = ed.said(sid, "user_message_chunk")
        assert "edit the notes" in user and "(tui send)" in user
        assert "Working on: edit the notes" in ed.said(sid)
        assert "Thinking about it." in ed.said(sid, "agent_thought_chunk")
        assert [u.title for u in ed.of(sid, "tool_call")] == ["Edit notes.txt"]
        assert any(u.status == "completed" for u in ed.of(sid, "tool_call_update"))
        assert ed.of(sid, "plan")
        replayed = len(ed.updates)
        code, _, err = await _tui("send", sid, "hello again", "--wait")
        assert code == 0, err
        await ed.until(lambda: "Working on: hello again" in ed.said(sid), "the live turn")
        live = [u for s, u in ed.updates[replayed:] if u.session_update == "user_message_chunk"]
        assert [u.content.text for u in live] == [
            "[" + live[0].content.text.split("[", 1)[1].split("]")[0] + "] hello again"
        ]
        assert "(tui send)" in live[0].content.text
        # the editor's own turn in the same session, after another client's
        answer = await ed.prompt(sid, "recall")
        assert answer.stop_reason == "end_turn" and "I remember 3 prompts" in ed.said(sid)


async def test_a_load_replays_the_same_updates_an_editor_following_live_was_sent(acp_tester: Path) -> None:
    """A load sends its replay in batches (one write each), built without the per-update models
    of a live update: what the editor reads is the same, message for message, as what an editor
    following the session live read of the same turns (a prompt, a reply, a thought, a plan, a
    tool call and its updates with a diff, another client's prompt named)."""
    (acp_tester / "notes.txt").write_text("first\n")
    made = tui("send", "--new", "--agent", "tester", "hello", "--wait")
    assert made.returncode == 0, made.stderr
    sid = made.stderr.strip().splitlines()[0]
    async with editor() as live:
        await live.conn.initialize(protocol_version=acp.PROTOCOL_VERSION)
        await live.conn.resume_session(cwd=str(acp_tester), session_id=sid)
        for prompt in ("edit the notes", "recall"):
            code, _, err = await _tui("send", sid, prompt, "--wait")
            assert code == 0, err
        await live.until(lambda: "I remember" in live.said(sid), "the live turns")
        assert {m["params"]["update"]["sessionUpdate"] for m in live.wire} >= {
            "user_message_chunk",
            "agent_message_chunk",
            "agent_thought_chunk",
            "plan",
            "tool_call",
            "tool_call_update",
        }
    async with editor() as loaded:
        await loaded.conn.initialize(protocol_version=acp.PROTOCOL_VERSION)
        await loaded.conn.load_session(cwd=str(acp_tester), session_id=sid)
    assert len(loaded.wire) > len(live.wire)
    assert loaded.wire[-len(live.wire) :] == live.wire


async def test_resume_follows_without_replaying_and_close_leaves_the_session(acp_tester: Path) -> None:
    made = tui("send", "--new", "--agent", "tester", "hello", "--wait")
    assert made.returncode == 0, made.stderr
    sid = made.stderr.strip().splitlines()[0]
    async with editor() as ed:
        await ed.conn.initialize(protocol_version=acp.PROTOCOL_VERSION)
        await ed.conn.resume_session(cwd=str(acp_tester), session_id=sid)
        assert ed.updates == [], "a resume replays nothing"
        answer = await ed.prompt(sid, "again")
        assert answer.stop_reason == "end_turn" and "Working on: again" in ed.said(sid)
        await ed.conn.close_session(session_id=sid)
        code, _, err = await _tui("send", sid, "after close", "--wait")
        assert code == 0, err
        assert "after close" not in ed.said(sid, "user_message_chunk"), "a closed session is not followed"
    assert [row["live"] for row in sessions()] == [True]


async def test_a_question_answered_by_another_client_is_withdrawn_from_the_editor(acp_tester: Path) -> None:
    async with editor("--agent", "tester") as ed:
        sid = await ed.new(acp_tester)
        turn = asyncio.create_task(ed.prompt(sid, "permission to test"))
        await ed.until(lambda: ed.asked, "the permission request")
        [asked] = ed.asked
        assert [(o.name, o.kind) for o in asked.options] == [
            ("Allow", "allow_once"),
            ("Allow (2)", "allow_always"),
            ("Reject", "reject_once"),
        ]
        [call] = ed.of(sid, "tool_call")
        assert call.title == "Run make test" and asked.tool_call.tool_call_id == call.tool_call_id
        code, _, err = await _tui("answer", sid[:8], "--option", "3")
        assert code == 0, err
        answer = await turn
        assert answer.stop_reason == "end_turn"
        assert "permission: reject" in ed.said(sid)
        assert "answered by" in ed.said(sid) and "(tui answer): Reject" in ed.said(sid)
        await ed.until(lambda: ed.cancelled, "the request withdrawn")
        [withdrawn] = ed.cancelled
        assert ed.sent[withdrawn] == "session/request_permission"
        assert not asked.answer.done(), "the editor never answered it"


async def test_a_question_answered_in_the_editor(acp_tester: Path) -> None:
    async with editor("--agent", "tester") as ed:
        sid = await ed.new(acp_tester)
        turn = asyncio.create_task(ed.prompt(sid, "permission to test"))
        await ed.until(lambda: ed.asked, "the permission request")
        ed.asked[0].answer.set_result("2")
        answer = await turn
        assert answer.stop_reason == "end_turn" and "permission: allow-always" in ed.said(sid)
        assert ed.cancelled == []


async def test_cancel_interrupts_the_turn(acp_tester: Path) -> None:
    async with editor("--agent", "tester") as ed:
        sid = await ed.new(acp_tester)
        turn = asyncio.create_task(ed.prompt(sid, "slow"))
        await ed.until(lambda: "slowly" in ed.said(sid), "the turn to run")
        await ed.conn.cancel(session_id=sid)
        assert (await turn).stop_reason == "cancelled"


async def test_a_worker_killed_mid_turn_is_a_failed_turn_and_the_next_prompt_works(
    state_dir: Path, tmp_path: Path
) -> None:
    async with editor() as ed:
        sid = await ed.new(tmp_path)
        turn = asyncio.create_task(ed.prompt(sid, RUNS_UNTIL_STOPPED))
        await ed.until(lambda: "started" in ed.said(sid), "the program to run")
        os.kill(worker_pid(state_dir, sid), signal.SIGKILL)
        with pytest.raises(acp.RequestError, match="the turn failed"):
            await turn
        answer = await ed.prompt(sid, "print(1 + 1)")
        assert answer.stop_reason == "end_turn" and "2\n" in ed.said(sid)


async def test_a_python_question_is_a_permission_and_free_text_is_said_with_its_command(
    state_dir: Path, tmp_path: Path
) -> None:
    async with editor() as ed:
        sid = await ed.new(tmp_path)
        turn = asyncio.create_task(
            ed.prompt(sid, "x = ask('Proceed?', options=['yes', 'no']); print('got', x)")
        )
        await ed.until(lambda: ed.asked, "the question")
        [asked] = ed.asked
        assert [(o.option_id, o.name, o.kind) for o in asked.options] == [
            ("1", "yes", "allow_once"),
            ("2", "no", "reject_once"),
        ]
        assert asked.tool_call.title == "Proceed?"
        assert f"`tui answer {sid[:8]} --text 'your answer'`" in ed.said(sid)
        asked.answer.set_result("2")
        assert (await turn).stop_reason == "end_turn"
        assert "got no" in ed.said(sid)
        # a question with no options: said in a message, answered with `tui answer`
        turn = asyncio.create_task(ed.prompt(sid, "print('got', ask('Name?'))"))
        await ed.until(lambda: "Name?" in ed.said(sid), "the question said")
        code, _, err = await _tui("answer", sid[:8], "--text", "Ana")
        assert code == 0, err
        assert (await turn).stop_reason == "end_turn"
        assert "got Ana" in ed.said(sid) and len(ed.asked) == 1


async def test_an_agents_modes_and_model_are_config_options(acp_tester: Path) -> None:
    async with editor("--agent", "tester") as ed:
        sid = await ed.new(acp_tester)
        await ed.prompt(sid, "hello")
        await ed.until(lambda: ed.of(sid, "config_option_update"), "the agent's settings")
        options = {o.id: o for o in ed.of(sid, "config_option_update")[-1].config_options}
        assert options["mode"].current_value == "ask" and options["model"].current_value == "fast"
        assert [c.value for c in options["model"].options] == ["fast", "smart", "smart[1m]"]
        changed = await ed.conn.set_config_option(config_id="model", session_id=sid, value="smart")
        assert {o.id: o.current_value for o in changed.config_options}["model"] == "smart"
        await ed.conn.set_session_mode(session_id=sid, mode_id="code")
        await ed.prompt(sid, "which")
        assert "mode code, model smart" in ed.said(sid)
        await ed.until(lambda: ed.of(sid, "current_mode_update"), "the mode said")
        assert ed.of(sid, "current_mode_update")[-1].current_mode_id == "code"
        await ed.until(lambda: ed.of(sid, "available_commands_update"), "the agent's commands")
        commands = ed.of(sid, "available_commands_update")
        assert [c.name for c in commands[-1].available_commands] == ["review", "compact"]


async def test_two_editors_on_one_session_the_first_answer_wins(acp_tester: Path) -> None:
    async with editor("--agent", "tester") as first, editor() as second:
        sid = await first.new(acp_tester)
        await second.conn.initialize(protocol_version=acp.PROTOCOL_VERSION)
        await second.conn.resume_session(cwd=str(acp_tester), session_id=sid)
        turn = asyncio.create_task(first.prompt(sid, "permission to test"))
        await first.until(lambda: first.asked, "the request to the first editor")
        await second.until(lambda: second.asked, "the request to the second editor")
        assert "] permission to test" in second.said(sid, "user_message_chunk")
        second.asked[0].answer.set_result("1")
        assert (await turn).stop_reason == "end_turn"
        assert "permission: allow-once" in first.said(sid)
        await first.until(lambda: first.cancelled, "the first editor's request withdrawn")
        assert "(editor): Allow" in first.said(sid)
        assert second.cancelled == [] and "answered by" not in second.said(sid)


async def test_a_session_stopped_elsewhere_is_started_again_by_the_next_prompt(
    state_dir: Path, tmp_path: Path
) -> None:
    async with editor() as ed:
        sid = await ed.new(tmp_path)
        assert (await ed.prompt(sid, "x = 1")).stop_reason == "end_turn"
        code, _, err = await _tui("stop", sid)
        assert code == 0, err
        answer = await ed.prompt(sid, "print('back')")
        assert answer.stop_reason == "end_turn" and "back" in ed.said(sid)


async def test_an_editor_goes_on_with_the_new_worker_after_tui_restart(
    state_dir: Path, tmp_path: Path
) -> None:
    async with editor() as ed:
        sid = await ed.new(tmp_path)
        assert (await ed.prompt(sid, "x = 1; print('before')")).stop_reason == "end_turn"
        code, _, err = await _tui("restart", sid)
        assert code == 0, err
        # A turn sent from elsewhere reaches the editor through the new worker, once.
        code, _, err = await _tui("send", sid, "print('elsewhere')", "--wait")
        assert code == 0, err
        await ed.until(lambda: "elsewhere" in ed.said(sid), "the turn sent after the restart")
        answer = await ed.prompt(sid, "print('after')")
        assert answer.stop_reason == "end_turn"
        said = ed.said(sid)
        assert [said.count(w) for w in ("before", "elsewhere", "after")] == [1, 1, 1], said
        prompts = ed.said(sid, "user_message_chunk")
        assert prompts.count("print('elsewhere')") == 1, prompts


PIXEL = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQAAAABJRU5ErkJggg=="
"""A PNG of one pixel, base64."""


async def test_an_acp_agents_session_takes_the_prompts_images_and_context(
    acp_tester: Path, state_dir: Path
) -> None:
    async with editor("--agent", "tester") as ed:
        init = await ed.conn.initialize(protocol_version=acp.PROTOCOL_VERSION)
        assert init.agent_capabilities.prompt_capabilities.image, "an ACP agent behind takes images"
        sid = str((await ed.conn.new_session(cwd=str(acp_tester))).session_id)
        notes = acp.resource_block(acp.embedded_text_resource("file:///notes.txt", "the notes say hi"))
        blocks = [acp.text_block("look at"), acp.image_block(PIXEL, "image/png"), notes]
        async with asyncio.timeout(60):
            answer = await ed.conn.prompt(session_id=sid, prompt=blocks)
        assert answer.stop_reason == "end_turn"
        assert "Working on: look at\nfile:///notes.txt:\n```\nthe notes say hi\n```" in ed.said(sid)
        stored = list((state_dir / "sessions" / sid / "images").iterdir())
        assert [p.suffix for p in stored] == [".png"]
    async with editor() as ed:
        init = await ed.conn.initialize(protocol_version=acp.PROTOCOL_VERSION)
        assert not init.agent_capabilities.prompt_capabilities.image, "a python session takes no images"


async def test_a_free_text_question_is_a_form_where_the_editor_fills_forms(
    state_dir: Path, tmp_path: Path
) -> None:
    async with editor() as ed:
        forms = schema.ClientCapabilities(
            elicitation=schema.ElicitationCapabilities(form=schema.ElicitationFormCapabilities())
        )
        await ed.conn.initialize(protocol_version=acp.PROTOCOL_VERSION, client_capabilities=forms)
        sid = str((await ed.conn.new_session(cwd=str(tmp_path))).session_id)
        turn = asyncio.create_task(ed.prompt(sid, "print('got', ask('Name?'))"))
        await ed.until(lambda: ed.forms, "the form")
        assert ed.forms[0].tool_call.title == "Name?" and ed.asked == []
        ed.forms[0].answer.set_result("Ana")
        assert (await turn).stop_reason == "end_turn" and "got Ana" in ed.said(sid)
        # answered elsewhere first: the form is withdrawn
        turn = asyncio.create_task(ed.prompt(sid, "print('got', ask('Town?'))"))
        await ed.until(lambda: len(ed.forms) == 2, "the second form")
        code, _, err = await _tui("answer", sid[:8], "--text", "Lyon")
        assert code == 0, err
        assert (await turn).stop_reason == "end_turn" and "got Lyon" in ed.said(sid)
        await ed.until(lambda: ed.cancelled, "the form withdrawn")
        assert ed.sent[ed.cancelled[0]] == "elicitation/create"
        assert "(tui answer): 'Lyon'" in ed.said(sid)


async def test_a_prompt_sent_while_another_clients_turn_runs_is_queued_behind_it(
    state_dir: Path, tmp_path: Path
) -> None:
    async with editor() as ed:
        sid = await ed.new(tmp_path)
        # Another client's turn, which runs until the file `go` is in the session's folder.
        waits = (
            "import os, time\nprint('started', flush=True)\nwhile not os.path.exists('go'): time.sleep(0.05)"
        )
        code, _, err = await _tui("send", sid, waits)
        assert code == 0, err
        await ed.until(lambda: "started" in ed.said(sid), "the other client's turn to run")
        turn = asyncio.create_task(ed.prompt(sid, "print('after it')"))
        journal = StatePaths(state_dir).session(sid).journal

        def queued() -> list[str]:
            events = (json.loads(line) for line in journal.read_text().splitlines() if line)
            return [i["prompt"] for e in events if e["type"] == "queue_changed" for i in e["items"]]

        await asyncio.to_thread(wait_until, lambda: "print('after it')" in queued(), "the prompt queued")
        (tmp_path / "go").touch()
        answer = await turn  # it ran once the other client's turn ended
        assert answer.stop_reason == "end_turn" and "after it" in ed.said(sid)


async def test_closing_the_editor_mid_turn_leaves_the_turn_running(state_dir: Path, tmp_path: Path) -> None:
    async with editor() as ed:
        sid = await ed.new(tmp_path)
        turn = asyncio.create_task(ed.prompt(sid, RUNS_UNTIL_STOPPED))
        await ed.until(lambda: "started" in ed.said(sid), "the program to run")
    with pytest.raises(ConnectionError):
        await turn
    [row] = sessions()
    assert row["state"] == "working" and row["live"]
    code, _, err = await _tui("interrupt", sid)
    assert code == 0 and "interrupted the running turn" in err, err


@pytest.mark.parametrize(
    ("provider", "finish", "stop"),
    [
        ("openai", "length", "max_tokens"),
        ("openai", "content_filter", "refusal"),
        ("anthropic", "length", "max_tokens"),
        ("anthropic", "content_filter", "refusal"),
    ],
)
async def test_a_models_reply_cut_short_is_its_stop_reason(
    state_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, provider: str, finish: str, stop: str
) -> None:
    monkeypatch.setenv("FAKE_KEY", "sk-test")
    with FakeModelServer() as server:
        url = server.url if provider == "openai" else server.root
        (Path(os.environ["TUI_CONFIG_DIR"]) / "config.toml").write_text(
            f'[models.local]\nprovider = "{provider}"\nmodel = "fake-1"\nbase_url = "{url}"\n'
            'api_key_env = "FAKE_KEY"\n'
        )
        server.script(Text(["The answer ", "is"], finish=finish), Text(["All of it."]))
        async with editor("--model", "local") as ed:
            sid = await ed.new(tmp_path)
            answer = await ed.prompt(sid, "tell me")
            assert answer.stop_reason == stop
            assert "The answer is" in ed.said(sid)
            again = await ed.prompt(sid, "go on")
            assert again.stop_reason == "end_turn"


async def test_a_hosted_agents_stop_reason_reaches_the_journal_and_the_editor(
    acp_tester: Path, state_dir: Path
) -> None:
    async with editor("--agent", "tester") as ed:
        sid = await ed.new(acp_tester)
        answer = await ed.prompt(sid, "stop at max_tokens")
        assert answer.stop_reason == "max_tokens"
        assert "Cut here" in ed.said(sid)
    piped = tui("attach", sid, input="stop at refusal\n")
    assert piped.returncode == 0, piped.stderr
    assert "turn 2 completed; the model refused to go on" in piped.stderr
    journal = state_dir / "sessions" / sid / "journal.jsonl"
    ended = [e for e in map(json.loads, journal.read_text().splitlines()) if e["type"] == "turn_ended"]
    assert [(e["outcome"], e.get("stop_reason")) for e in ended] == [
        ("completed", "max_tokens"),
        ("completed", "refusal"),
    ]
    sent = tui("send", sid, "stop at max_tokens", "--wait")
    assert sent.returncode == 0, sent.stderr
    assert "the turn completed; the reply was cut at the model's token limit" in sent.stderr
    shown = tui("transcript", sid).stdout
    assert "the reply was cut at the model's token limit" in shown


async def test_redact_catches_a_secret_printed_in_two_pieces(state_dir: Path, tmp_path: Path) -> None:
    token = "ghp_" + "Zx81QwErTyUiOpAsDfGhJkLzXcVbNm123456"
    go = tmp_path / "go"
    # The program prints the token's first half, and the rest once the first is in the journal:
    # two output pieces, the first ending mid-line (the prompt holds the token only in bits).
    program = (
        "import os, sys, time\n"
        f"sys.stdout.write('token: ' + {token[:6]!r} + {token[6:12]!r}); sys.stdout.flush()\n"
        f"while not os.path.exists({str(go)!r}): time.sleep(0.02)\n"
        f"print({token[12:20]!r} + {token[20:]!r})\n"
    )

    def texts() -> list[str]:
        journal = StatePaths(state_dir).session(sid).journal
        events = [json.loads(line) for line in journal.read_text().splitlines()] if journal.exists() else []
        return [e["text"] for e in events if e["type"] == "text"]

    async with editor("--redact") as ed:
        await ed.conn.initialize(protocol_version=acp.PROTOCOL_VERSION)
        sid = str((await ed.conn.new_session(cwd=str(tmp_path))).session_id)
        turn = asyncio.create_task(ed.prompt(sid, program))
        await asyncio.to_thread(wait_until, lambda: any(token[:12] in t for t in texts()), "the first piece")
        go.touch()
        assert (await turn).stop_reason == "end_turn"
        said = ed.said(sid)
        assert "token: [redacted: GitHub token, 33-64 chars]" in said, said
        assert token[:12] not in said and token[12:] not in said, said
    assert "".join(texts()) == f"token: {token}\n", texts()  # the owner's journal keeps the bytes


async def test_loading_a_session_writes_nothing_to_its_journal_until_the_editor_acts(
    state_dir: Path, tmp_path: Path
) -> None:
    made = tui("send", "--new", "print(6 * 7)", "--wait")
    assert made.returncode == 0, made.stderr
    sid = made.stderr.strip().splitlines()[0]
    paths = StatePaths(state_dir).session(sid)
    before = paths.journal.read_bytes()
    async with editor() as ed:
        await ed.conn.initialize(protocol_version=acp.PROTOCOL_VERSION)
        for _ in range(5):
            await ed.conn.load_session(cwd=str(tmp_path), session_id=sid)
            assert "42" in ed.said(sid)
        assert paths.journal.read_bytes() == before, "a load wrote to the journal it read"
        # The editor is attached for anyone who asks now, though no line says so yet.
        transport = httpx.AsyncHTTPTransport(uds=str(paths.socket))
        async with httpx.AsyncClient(transport=transport, base_url="http://w") as http:
            shown = (await http.get("/transcript", params={"limit": 0})).json()
        assert [p.get("via") for p in shown["attached"]] == [["editor"]]
        # Once it acts, the journal names it as attached.
        assert (await ed.prompt(sid, "print(7)")).stop_reason == "end_turn"
    lines = [json.loads(line) for line in paths.journal.read_bytes()[len(before) :].splitlines()]
    assert [["editor"]] in [
        [p.get("via") for p in line["attached"]] for line in lines if line["type"] == "status"
    ]


async def test_a_load_while_a_turn_prints_tells_each_line_once_across_the_seam(
    state_dir: Path, tmp_path: Path
) -> None:
    """A load tells the history up to where the journal stood, read from the journal file, and
    follows from there: output printed while it loads is neither lost nor told twice."""
    made = tui("send", "--new", "--dir", str(tmp_path), "print('ready')", "--wait")
    assert made.returncode == 0, made.stderr
    sid = made.stderr.strip().splitlines()[0]
    go = tmp_path / "go"  # in the session's folder, where its program sees it
    program = (
        "import os, time\n"
        "i = 0\n"
        f"while not os.path.exists({str(go)!r}):\n"
        "    print(f'line {i}', flush=True); i += 1; time.sleep(0.002)\n"
        "print('done')\n"
    )
    sent = tui("send", sid, program)
    assert sent.returncode == 0, sent.stderr
    journal = StatePaths(state_dir).session(sid).journal
    await asyncio.to_thread(wait_until, lambda: b"line 20" in journal.read_bytes(), "the turn printing")
    async with editor() as ed:
        await ed.conn.initialize(protocol_version=acp.PROTOCOL_VERSION)
        await ed.conn.load_session(cwd=str(tmp_path), session_id=sid)
        go.touch()  # the turn ends only once the load answered: its last lines come live
        await ed.until(lambda: "done\n" in ed.said(sid), "the turn's end")
    said = ed.said(sid)
    printed = said[said.index("line 0\n") :]
    count = printed.count("\n") - 1
    assert printed == "".join(f"line {i}\n" for i in range(count)) + "done\n", printed
