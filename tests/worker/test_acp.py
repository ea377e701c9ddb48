"""The ACP agent against a real agent subprocess (tests/acp_agent.py), through a real worker."""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
from collections.abc import AsyncIterator, Callable
from pathlib import Path

import pytest
from acp_agent import agent_pids, configure
from helpers import TIMEOUT, eventually, stop_workers, wait_until

from tui.link.launch import start_worker
from tui.store import StatePaths, create_session
from worker.conftest import Worker


@pytest.fixture
def config_dir(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    folder = tmp_path / "config"
    folder.mkdir()
    monkeypatch.setenv("TUI_CONFIG_DIR", str(folder))
    configure(folder, tmp_path / "agent-state")
    return folder


@pytest.fixture
async def acp_worker(state_dir: Path, workdir: Path, config_dir: Path) -> AsyncIterator[Callable[[], Worker]]:
    state = StatePaths(state_dir)
    made: list[Worker] = []

    def make() -> Worker:
        sid = create_session(state, working_directory=workdir, agent="tester").id
        made.append(Worker(state, sid, start_worker(state, sid, timeout=TIMEOUT)))
        return made[-1]

    yield make
    for w in made:
        await w.close()
        stop_workers(state_dir, w.session_id)
        for pid in agent_pids(w.session_id):  # a stubborn agent outlives a killed worker
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        wait_until(lambda w=w: not agent_pids(w.session_id), "the agent to end")


def texts(worker: Worker, kind: str, field: str = "text") -> str:
    return "".join(json.loads(line)[field] for line in _lines(worker, kind))


def _lines(worker: Worker, kind: str) -> list[str]:
    return [ln for ln in worker.paths.journal.read_text().splitlines() if f'"type":"{kind}"' in ln]


def events(worker: Worker, kind: str) -> list[dict[str, object]]:
    return [json.loads(line) for line in _lines(worker, kind)]


async def test_a_turn_streams_text_thinking_and_the_agent_says_its_commands(
    acp_worker: Callable[[], Worker],
) -> None:
    worker = acp_worker()
    ended = await worker.turn("hello")
    assert ended["outcome"] == "completed", ended["error"]
    assert ended["reply"] == "Working on: hello\nDone.\n"
    assert texts(worker, "thinking") == "Thinking about it."
    # The agent says its commands after `session/new`, in its own time (as real adapters do).
    await eventually(lambda: any(e["commands"] for e in events(worker, "agent_info")), "its commands")
    info = (await worker.client().get("/info")).json()
    assert info["agent"] == "tester" and info["reply_format"] == "markdown"
    assert [c["name"] for c in info["commands"]] == ["review", "compact"]
    assert events(worker, "agent_info")[-1]["commands"][0]["name"] == "review"
    assert (worker.paths.root / "acp.json").is_file()


async def test_an_edit_shows_a_plan_a_titled_tool_call_and_its_diff(
    acp_worker: Callable[[], Worker], workdir: Path
) -> None:
    (workdir / "notes.txt").write_text("old line\n")
    worker = acp_worker()
    ended = await worker.turn("please edit")
    assert ended["outcome"] == "completed"
    assert (workdir / "notes.txt").read_text() == "hello from the agent\nold line\n"
    started = events(worker, "tool_started")[0]
    assert started["title"] == "Edit notes.txt" and started["kind"] == "edit"
    assert started["locations"] == ["notes.txt"]  # relative to the working directory
    diff = events(worker, "tool_output")[0]["diff"]
    assert diff == {
        "path": "notes.txt",
        "old": "old line\n",
        "new": "hello from the agent\nold line\n",
    }
    assert events(worker, "tool_ended")[0]["status"] == "completed"
    plans = [[e["status"] for e in p["entries"]] for p in events(worker, "plan")]  # type: ignore[union-attr]
    assert plans == [["in_progress", "pending"], ["completed", "in_progress"], ["completed", "completed"]]
    # a client attaching later reads the same from /transcript
    turn = (await worker.client().get("/transcript")).json()["turns"][-1]
    assert turn["tools"][0]["title"] == "Edit notes.txt" and turn["tools"][0]["diffs"] == [diff]
    assert [e["status"] for e in turn["plan"]] == ["completed", "completed"]


async def test_a_permission_is_a_question_with_unique_labels_mapped_back(
    acp_worker: Callable[[], Worker],
) -> None:
    worker = acp_worker()
    client = worker.client()
    follower = worker.follow()
    await client.post("/turn", json={"prompt": "permission please"})
    asked = await follower.until(lambda e: e.type == "question_asked")
    assert asked.data["text"] == "Allow Run make test?"
    assert [o["label"] for o in asked.data["options"]] == ["Allow", "Allow (2)", "Reject"]
    reply = await client.post(
        "/answer", json={"question_id": asked.data["question_id"], "selected": ["Allow (2)"]}
    )
    assert reply.status_code == 200, reply.text
    ended = await follower.until(lambda e: e.type == "turn_ended")
    assert ended.data["outcome"] == "completed"
    assert "permission: allow-always" in ended.data["reply"]
    assert "2 passed" in texts(worker, "tool_output")


async def test_a_dismissed_permission_is_cancelled_for_the_agent(acp_worker: Callable[[], Worker]) -> None:
    worker = acp_worker()
    client = worker.client()
    follower = worker.follow()
    await client.post("/turn", json={"prompt": "permission"})
    asked = await follower.until(lambda e: e.type == "question_asked")
    dismissed = await client.post("/question/dismiss", json={"question_id": asked.data["question_id"]})
    assert dismissed.status_code == 200, dismissed.text
    ended = await follower.until(lambda e: e.type == "turn_ended")
    assert "permission: cancelled" in ended.data["reply"]


async def test_files_are_served_only_inside_the_working_directory(
    acp_worker: Callable[[], Worker], workdir: Path
) -> None:
    (workdir / "notes.txt").write_text("inside\n")
    (workdir.parent / "outside.txt").write_text("secret\n")
    worker = acp_worker()
    ended = await worker.turn("read")
    assert "notes.txt says: inside" in ended["reply"]
    assert "outside.txt was refused; the write was refused" in ended["reply"]
    notes = texts(worker, "note")
    assert "refused the agent's read of" in notes and "outside.txt" in notes
    assert "refused the agent's write of /tmp/../etc/escaped.txt" in notes


async def test_a_tool_call_takes_the_title_input_and_content_of_its_updates(
    acp_worker: Callable[[], Worker], workdir: Path
) -> None:
    worker = acp_worker()
    follower = worker.follow()
    ended = await worker.turn("rename")
    assert ended["outcome"] == "completed", ended["error"]
    assert (workdir / "out.txt").read_text() == "written by the agent\n"
    assert events(worker, "tool_started")[0]["title"] == "Preparing file…"
    diff = {"path": "out.txt", "old": None, "new": "written by the agent\n"}
    # live: the update follows the start on the stream
    updated = await follower.until(lambda e: e.type == "tool_updated" and "title" in e.data)
    assert updated.data["title"] == "Write out.txt"
    # the record, as the transcript and a later attach read it
    tool = (await worker.client().get("/transcript")).json()["turns"][-1]["tools"][0]
    assert tool["title"] == "Write out.txt" and tool["kind"] == "edit"
    assert tool["args"] == {"file_path": str(workdir / "out.txt"), "content": "written by the agent\n"}
    assert tool["locations"] == ["out.txt"]
    # the final content (a diff) replaced the line it first showed
    assert tool["output"] == "" and tool["diffs"] == [diff] and tool["status"] == "completed"


async def test_a_missing_file_reads_as_empty_so_an_agent_can_create_it(
    acp_worker: Callable[[], Worker], workdir: Path
) -> None:
    worker = acp_worker()
    ended = await worker.turn("create")
    assert ended["outcome"] == "completed", ended["error"]
    assert "created new.txt (it held '')" in ended["reply"]
    assert (workdir / "new.txt").read_text() == "brand new\n"
    assert events(worker, "tool_ended")[0]["status"] == "completed"


async def test_a_symlink_out_of_the_folder_is_refused(
    acp_worker: Callable[[], Worker], workdir: Path
) -> None:
    (workdir.parent / "outside.txt").write_text("secret\n")
    (workdir / "notes.txt").symlink_to(workdir.parent / "outside.txt")
    worker = acp_worker()
    ended = await worker.turn("read")
    assert "secret" not in ended["reply"] and ended["outcome"] == "failed"
    assert "refused the agent's read" in texts(worker, "note")


async def test_an_interrupt_cancels_the_agents_turn(acp_worker: Callable[[], Worker]) -> None:
    worker = acp_worker()
    client = worker.client()
    follower = worker.follow()
    await client.post("/turn", json={"prompt": "slow"})
    await follower.until(lambda e: e.type == "text" and "slowly" in e.data["text"])
    await client.post("/interrupt")
    ended = await follower.until(lambda e: e.type == "turn_ended", within=3.0)
    assert ended.data["outcome"] == "interrupted"


async def test_a_crash_fails_the_turn_with_its_stderr_and_the_next_turn_starts_it_again(
    acp_worker: Callable[[], Worker],
) -> None:
    worker = acp_worker()
    first = await worker.turn("hello")
    crashed = await worker.turn("crash now")
    assert crashed["outcome"] == "failed"
    assert "exited with code 3" in crashed["error"]
    assert "the test agent crashes on purpose" in crashed["error"]
    assert "the test agent crashes on purpose" in worker.paths.log.read_text()
    again = await worker.turn("recall")
    assert first["outcome"] == again["outcome"] == "completed"
    # the new agent process loaded the same ACP session: it remembers every prompt
    assert "I remember 3 prompts: ['hello', 'crash now', 'recall']" in again["reply"]


async def test_a_restarted_worker_loads_the_agents_session_without_journalling_its_replay(
    acp_worker: Callable[[], Worker],
) -> None:
    worker = acp_worker()
    await worker.turn("hello")
    worker.kill()
    wait_until(lambda: not agent_pids(worker.session_id), "the orphaned agent to end")
    worker.restart()
    again = await worker.turn("recall")
    assert "I remember 2 prompts" in again["reply"]
    assert "replayed" not in worker.paths.journal.read_text()
    assert "loaded session" in worker.paths.log.read_text()


async def test_an_agent_without_load_says_it_is_a_new_agent_session(
    acp_worker: Callable[[], Worker], config_dir: Path, tmp_path: Path
) -> None:
    configure(config_dir, tmp_path / "agent-state", load=False)
    worker = acp_worker()
    await worker.turn("hello")
    worker.kill()
    worker.restart()
    again = await worker.turn("recall")
    assert "I remember 1 prompts" in again["reply"]
    assert "new agent session" in texts(worker, "note")


async def test_stopping_the_session_leaves_no_agent_process(acp_worker: Callable[[], Worker]) -> None:
    worker = acp_worker()
    await worker.turn("hello")
    assert agent_pids(worker.session_id)
    reply = await worker.client().post("/leave")
    assert reply.status_code in (200, 202, 204)
    wait_until(lambda: not agent_pids(worker.session_id), "the agent to end")


async def _stubborn(acp_worker: Callable[[], Worker], config_dir: Path, tmp_path: Path) -> Worker:
    """A worker whose agent ignores SIGTERM and the end of stdin, and has a child, after one turn."""
    configure(config_dir, tmp_path / "agent-state", stubborn=True)
    worker = acp_worker()
    await worker.turn("hello")
    wait_until(lambda: len(agent_pids(worker.session_id)) == 2, "the agent and its child")
    return worker


async def test_a_stubborn_agent_and_its_children_are_stopped_with_the_session(
    acp_worker: Callable[[], Worker], config_dir: Path, tmp_path: Path
) -> None:
    worker = await _stubborn(acp_worker, config_dir, tmp_path)
    reply = await worker.client().post("/leave")
    assert reply.status_code in (200, 202, 204)
    wait_until(lambda: not agent_pids(worker.session_id), "the agent's whole group to end")


async def test_a_new_worker_ends_the_agent_a_killed_one_left_behind(
    acp_worker: Callable[[], Worker], config_dir: Path, tmp_path: Path
) -> None:
    worker = await _stubborn(acp_worker, config_dir, tmp_path)
    left = set(agent_pids(worker.session_id))
    worker.kill()
    if shutil.which("bwrap") is None:
        assert set(agent_pids(worker.session_id)) == left  # unconfined, it outlives the worker
    # (confined, bubblewrap ends it with the worker: --die-with-parent)
    worker.restart()
    again = await worker.turn("recall")
    assert "I remember 2 prompts" in again["reply"]
    wait_until(lambda: not left & set(agent_pids(worker.session_id)), "the left-behind agent to end")


@pytest.mark.skipif(
    shutil.which("bwrap") is None, reason="bubblewrap is not installed: agents run unconfined"
)
async def test_the_agent_cannot_reach_tui_s_own_files_and_the_first_screen_says_what_it_can(
    acp_worker: Callable[[], Worker],
) -> None:
    worker = acp_worker()
    ended = await worker.turn("probe")
    assert ended["outcome"] == "completed", ended["error"]
    assert "journal: FileNotFoundError" in ended["reply"], ended["reply"]
    notes = [str(e["text"]) for e in events(worker, "note")]
    assert any(
        "tui's sessions, config, sockets and the token files tui knows of are hidden" in n for n in notes
    ), notes


async def test_the_agents_modes_settings_and_usage_reach_info_and_status(
    acp_worker: Callable[[], Worker],
) -> None:
    worker = acp_worker()
    ended = await worker.turn("usage")
    assert ended["outcome"] == "completed", ended["error"]
    info = (await worker.client().get("/info")).json()
    assert info["mode"] == "ask" and [m["value"] for m in info["modes"]] == ["ask", "code"]
    (model,) = info["settings"]
    assert model["category"] == "model" and model["current"] == "fast"
    assert [(c["value"], c["name"]) for c in model["choices"]] == [
        ("fast", "Fast One"),
        ("smart", "Smart One"),
        ("smart[1m]", "Smart One, 1M context"),
    ]
    assert events(worker, "agent_info")[-1]["settings"] == info["settings"]
    status = [e for e in events(worker, "status") if e.get("cost")]
    assert status and status[0]["cost"] == "$0.42"
    assert (status[0]["context_used"], status[0]["context_limit"]) == (12_345, 200_000)


async def test_a_mode_or_model_the_agent_does_not_offer_is_refused_naming_those_it_does(
    acp_worker: Callable[[], Worker],
) -> None:
    worker = acp_worker()
    client = worker.client()
    await eventually(lambda: any(e["modes"] for e in events(worker, "agent_info")), "its modes")
    refused = await client.post("/model", json={"model": "nope", "setting": "mode"})
    assert refused.status_code == 400 and refused.json()["error"] == "invalid_model"
    assert "'nope'" in refused.json()["detail"] and "ask (Ask), code (Code)" in refused.json()["detail"]
    taken = await client.post("/model", json={"model": "Smart One"})  # by its name too
    assert taken.status_code == 200, taken.text
    await eventually(
        lambda: events(worker, "agent_info")[-1]["settings"][0]["current"] == "smart", "the model switched"
    )
    assert events(worker, "model_changed")[-1]["model"] == "Smart One"


async def test_options_gemini_refuses_in_a_folder_it_does_not_trust_say_so_before_they_are_picked(
    acp_worker: Callable[[], Worker], config_dir: Path, workdir: Path, tmp_path: Path
) -> None:
    home = tmp_path / "home"
    (home / ".gemini").mkdir(parents=True)
    config = config_dir / "config.toml"
    config.write_text(
        config.read_text().replace("env = { ", f'env = {{ TEST_AGENT_NAME = "gemini-cli", HOME = "{home}", ')
    )

    async def allow_always() -> tuple[str, str]:
        worker = acp_worker()
        client = worker.client()
        follower = worker.follow()
        await client.post("/turn", json={"prompt": "permission"})
        asked = await follower.until(lambda e: e.type == "question_asked")
        said = {o["label"]: o["description"] for o in asked.data["options"]}
        await client.post("/question/dismiss", json={"question_id": asked.data["question_id"]})
        await follower.until(lambda e: e.type == "turn_ended")
        modes = (await client.get("/info")).json()["modes"]
        return said["Allow (2)"], next(m["description"] for m in modes if m["value"] == "code")

    option, mode = await allow_always()  # no rule trusts the folder: Gemini refuses them here
    assert option.startswith("allow always — fails here: Gemini CLI does not trust this folder")
    assert "fails here" in mode
    (home / ".gemini" / "trustedFolders.json").write_text(json.dumps({str(workdir): "TRUST_FOLDER"}))
    option, mode = await allow_always()
    assert option == "allow always" and "fails here" not in mode


async def test_an_agents_error_is_one_line_with_its_details(acp_worker: Callable[[], Worker]) -> None:
    ended = await acp_worker().turn("broken")
    assert ended["outcome"] == "failed"
    assert ended["error"] == (
        "the agent 'tester' answered with an error: Internal error: Claude Code process exited with code 1"
    )


async def test_a_permission_for_a_call_never_started_starts_it_with_its_title_and_diff(
    acp_worker: Callable[[], Worker],
) -> None:
    worker = acp_worker()
    client = worker.client()
    follower = worker.follow()
    await client.post("/turn", json={"prompt": "unannounced"})
    asked = await follower.until(lambda e: e.type == "question_asked")
    assert asked.data["text"] == "Allow Writing to new.txt?"
    await client.post("/answer", json={"question_id": asked.data["question_id"], "selected": ["Allow"]})
    await follower.until(lambda e: e.type == "turn_ended")
    (started,) = events(worker, "tool_started")
    assert started["title"] == "Writing to new.txt" and started["locations"] == ["new.txt"]
    assert events(worker, "tool_output")[0]["diff"] == {"path": "new.txt", "old": None, "new": "new text\n"}
    assert events(worker, "tool_ended")[0]["status"] == "error"


async def test_a_model_said_in_the_sessions_models_is_shown_and_not_switched(
    acp_worker: Callable[[], Worker], config_dir: Path
) -> None:
    config = config_dir / "config.toml"
    config.write_text(config.read_text().replace("env = { ", 'env = { TEST_AGENT_MODELS = "1", '))
    worker = acp_worker()
    client = worker.client()
    await eventually(lambda: any(e["settings"] for e in events(worker, "agent_info")), "its model")
    (model,) = (await client.get("/info")).json()["settings"]
    assert (model["category"], model["current"]) == ("model", "gemini-2.5-pro")
    assert model["choices"] == [{"value": "gemini-2.5-pro", "name": "Gemini 2.5 Pro", "description": ""}]
    refused = await client.post("/model", json={"model": "gemini-2.5-pro"})
    assert refused.status_code == 400 and "agent's own settings" in refused.json()["detail"]
