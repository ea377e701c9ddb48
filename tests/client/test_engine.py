"""`WorkerEngine`, the one seam where workers run: every start, look-up and stop of a session's
worker goes through it, and ``[cluster] engine = "ray"`` without Ray says in one line what to install."""

from __future__ import annotations

import importlib.util
import sys
from collections import Counter
from collections.abc import Callable, Hashable
from pathlib import Path

import pytest
from helpers import eventually, wait_until

from client.helpers import kill_worker, sessions, tui
from tui.access.engines import engine_for
from tui.access.local import LocalAccess
from tui.config import ClusterSettings, Config
from tui.errors import TuiError
from tui.link.engine import LocalEngine, WorkerEngine
from tui.store import StatePaths, WorkerSidecar


class Counting:
    """`LocalEngine`, counting what it is asked."""

    name = "counting"
    patience = 10.0

    def __init__(self, state: StatePaths) -> None:
        self.inner = LocalEngine(state)
        self.asked: Counter[str] = Counter()

    def holds(self, session_id: str) -> bool:
        self.asked["holds"] += 1
        return self.inner.holds(session_id)

    def locate(self, session_id: str) -> WorkerSidecar | None:
        self.asked["locate"] += 1
        return self.inner.locate(session_id)

    def mark(self, session_id: str) -> Hashable | None:
        self.asked["mark"] += 1
        return self.inner.mark(session_id)

    async def start(
        self,
        session_id: str,
        *,
        timeout: float = 10.0,  # noqa: ASYNC109 - a bound on the wait for the worker's bridge
        on_wait: Callable[[str], None] | None = None,
    ) -> WorkerSidecar:
        self.asked["start"] += 1
        return await self.inner.start(session_id, timeout=timeout, on_wait=on_wait)

    async def stop(self, session_id: str, *, again: str, reason: str = "", restart: bool = False) -> bool:
        self.asked["stop"] += 1
        return await self.inner.stop(session_id, again=again, reason=reason, restart=restart)


async def test_starting_finding_restarting_and_stopping_go_through_the_engine(
    state_dir: Path,
) -> None:
    engine = Counting(StatePaths(state_dir))
    assert isinstance(engine, WorkerEngine)
    access = LocalAccess(StatePaths(state_dir), engine=engine)

    sid = await access.create(working_directory=str(state_dir))
    assert engine.asked["start"] == 1
    link = await access.link(sid, client_id="test:engine:1")
    assert link.engine is engine
    done = await link.send_turn("print(6 * 7)", request_id="first")
    assert done.turn_id
    assert engine.asked["locate"] >= 1 and engine.asked["mark"] >= 1
    shown = await access.show(sid)
    assert shown.live

    # A worker that died is started again by the link, through the engine.
    kill_worker(state_dir, sid)
    wait_until(lambda: not engine.inner.holds(sid), "the killed worker to let go")
    starts = engine.asked["start"]
    located = await link.locate()
    assert located.status == "starting", located

    async def live() -> bool:
        return (await link.locate()).status == "live"

    await eventually(live, "the new worker")
    assert engine.asked["start"] == starts + 1

    assert await access.stop(sid)
    assert engine.asked["stop"] == 1
    assert not engine.inner.holds(sid)
    assert [s["live"] for s in sessions()] == [False]
    await link.close()


def test_the_engine_is_local_unless_config_says_otherwise(state_dir: Path) -> None:
    assert isinstance(engine_for(StatePaths(state_dir), Config()), LocalEngine)
    ray = Config(cluster=ClusterSettings(engine="ray"))
    with pytest.raises(TuiError, match=r"\[cluster\] engine = \"ray\""):
        engine_for(StatePaths(state_dir), ray)
    assert "ray" not in sys.modules


def test_tui_web_ray_names_the_cluster_as_config_toml_would(
    state_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from tui import cli
    from tui.access import engines

    assert cli.parse(["web", "--ray", "10.0.0.5:6379"]).ray == "10.0.0.5:6379"
    assert cli.parse(["web"]).ray is None
    for wrong in ("10.0.0.5", "10.0.0.5:port", ":6379"):
        with pytest.raises(SystemExit):
            cli.parse(["web", "--ray", wrong])
        said = capsys.readouterr().err.strip().splitlines()[-1]
        assert "not a Ray cluster's address; give HOST:PORT" in said, said
    # The [cluster] table's other settings still apply; an engine given in code is left as given.
    (tmp_path / "config.toml").write_text("[cluster]\nresources = { sessions = 0.01 }\n")
    monkeypatch.setenv("TUI_CONFIG_DIR", str(tmp_path))
    monkeypatch.setattr(engines, "_ray_address", None)
    engines.run_on_ray("10.0.0.5:6379")
    assert isinstance(engine_for(StatePaths(state_dir), Config()), LocalEngine)
    if importlib.util.find_spec("ray") is None:
        with pytest.raises(TuiError, match=r"pip install 'tui\[cluster\]'"):
            engine_for(StatePaths(state_dir))
        return
    from tui.link.ray import RayEngine

    engine = engine_for(StatePaths(state_dir))
    assert isinstance(engine, RayEngine)
    assert (engine.address, engine.resources) == ("10.0.0.5:6379", {"sessions": 0.01})


@pytest.mark.skipif(importlib.util.find_spec("ray") is not None, reason="Ray is installed here")
def test_ray_without_ray_says_what_to_install_and_makes_nothing(
    state_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "config.toml").write_text('[cluster]\nengine = "ray"\n')
    monkeypatch.setenv("TUI_CONFIG_DIR", str(tmp_path))
    out = tui("send", "--new", "print(1)", "--wait")
    assert out.returncode == 1, out
    lines = out.stderr.strip().splitlines()
    assert len(lines) == 1, out.stderr
    assert "pip install 'tui[cluster]'" in lines[0] and 'engine = "local"' in lines[0]
    assert sessions(all_=True) == []


def test_ray_s_driver_starts_inside_the_app_and_clients_wait_for_a_node_s_loss(state_dir: Path) -> None:
    """Ray's driver hands stderr's file descriptor to faulthandler as it starts: inside the app,
    whose streams have none (Textual's answer -1), it is given /dev/null meanwhile, and the app's
    own streams are back after. A client of a session on Ray waits as long as a failover takes."""
    import io

    from tui.link.local import LocalLink
    from tui.link.ray import RayEngine, _real_std_streams

    class Screen(io.StringIO):
        def fileno(self) -> int:
            return -1

    screen = Screen()
    saved = sys.stderr
    sys.stderr = screen
    try:
        with _real_std_streams():
            assert sys.stderr is not screen and sys.stderr.fileno() >= 0
        assert sys.stderr is screen
    finally:
        sys.stderr = saved
    state = StatePaths(state_dir)
    engine = RayEngine(state, "127.0.0.1:1")
    assert LocalLink(state, "0" * 16, engine=engine).no_worker_timeout == engine.patience > 10
    assert LocalLink(state, "0" * 16).no_worker_timeout == 10


def test_the_status_row_names_the_cluster_node_a_session_runs_on(state_dir: Path) -> None:
    """A session whose worker runs on a cluster's node (``worker.json``'s ``address``, as the
    Ray engine's workers write it): the status row says ``ray node HOST``, not ``local``."""
    from datetime import UTC, datetime

    from tui.link.attachment import Attachment
    from tui.link.local import LocalLink
    from tui.ui.widgets.status import StatusRows

    state = StatePaths(state_dir)
    sid = "0" * 16

    class OnNode(Counting):
        name = "ray"

        def locate(self, session_id: str) -> WorkerSidecar | None:
            return WorkerSidecar(
                pid=1,
                epoch=1,
                socket="/nowhere",
                address="10.0.0.5:4567",
                started_at=datetime.now(UTC),
                version="1",
            )

    def row(link: LocalLink) -> str:
        status = StatusRows(clock=lambda: 0.0)
        status.status = Attachment(link).snapshot()
        return status.link_row()

    assert row(LocalLink(state, sid)).startswith("local · live")
    link = LocalLink(state, sid, engine=OnNode(state))
    assert row(link).startswith("ray · live")  # its node is not known until its worker is found
    link.paths.root.mkdir(parents=True)
    link.paths.secret.write_text("s3cret\n")
    link.bridge_client()
    assert row(link).startswith("ray node 10.0.0.5 · live")
