"""Sessions whose workers run in detached Ray actors on a real three-node Ray cluster on loopback
(``[cluster] engine = "ray"`` in config.toml), as a user runs them: ``tui send --new … --wait``,
``tui attach`` and ``tui send`` reaching the worker over its TCP bridge, a wrong secret refused,
and a node killed mid-turn: the session comes back on another node from its journal."""

from __future__ import annotations

import asyncio
import importlib.util
import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from helpers import wait_until

from client.helpers import journal_seqs, tui, worker_pid
from tui.store import StatePaths, read_sidecar
from tui.store.remotes import Remote, add_remote

pytestmark = pytest.mark.skipif(
    importlib.util.find_spec("ray") is None,
    reason="Ray is not installed here (pip install 'tui[cluster]'); the cluster's tests need it",
)

LOST = "the machine running this turn was lost"


@pytest.fixture(scope="module")
def cluster() -> Iterator[Any]:
    """One cluster for the module: its head and two nodes that run sessions."""
    from ray_cluster import RayCluster

    with RayCluster() as running:
        yield running


@pytest.fixture
def on_ray(cluster: Any, state_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """config.toml naming the cluster; the new sessions' folder."""
    config = tmp_path / "config"
    config.mkdir()
    (config / "config.toml").write_text(
        f'[cluster]\nengine = "ray"\naddress = "{cluster.address}"\nresources = {{ sessions = 0.01 }}\n'
    )
    monkeypatch.setenv("TUI_CONFIG_DIR", str(config))
    monkeypatch.setenv("RAY_TMPDIR", cluster.temp)
    work = tmp_path / "work"
    work.mkdir()
    return work


def events(state_dir: Path, sid: str) -> list[dict[str, Any]]:
    path = StatePaths(state_dir).session(sid).journal
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


async def status_where(state_dir: Path, sid: str) -> str:
    """Where the app's status row says the session runs (`tui attach`'s link, its worker found)."""
    from tui.access.local import LocalAccess
    from tui.link.attachment import Attachment

    link = await LocalAccess(StatePaths(state_dir)).link(sid, client_id="tui:test:1")
    try:
        link.bridge_client()
        return Attachment(link).snapshot().where
    finally:
        await link.close()


def test_a_session_s_worker_runs_in_a_ray_actor(cluster: Any, on_ray: Path, state_dir: Path) -> None:
    out = tui("send", "--new", "--dir", str(on_ray), "print(6*7)", "--wait", timeout=240)
    assert out.returncode == 0, out.stderr
    assert out.stdout == "42\n"
    sid = out.stderr.strip().splitlines()[0]
    paths = StatePaths(state_dir).session(sid)
    # Its worker is the child of the session's actor, on a node that runs sessions.
    assert cluster.where(sid) in cluster.nodes[1:]
    parent = Path(f"/proc/{worker_pid(state_dir, sid)}/stat").read_text().rsplit(")", 1)[1].split()[1]
    assert "WorkerHost" in Path(f"/proc/{parent}/cmdline").read_text()
    # Its bridge listens on the node's address, behind the session's secret (mode 0600).
    car = read_sidecar(paths.sidecar)
    assert car is not None and car.address is not None and car.address.startswith("127.0.0.1:")
    assert paths.secret.stat().st_mode & 0o777 == 0o600
    secret = paths.secret.read_text().strip()
    refused = httpx.get(f"http://{car.address}/info", headers={"Authorization": "Bearer wrong"})
    assert refused.status_code == 401 and refused.json()["error"] == "unauthorized"
    assert httpx.get(f"http://{car.address}/info").status_code == 401
    info = httpx.get(f"http://{car.address}/info", headers={"Authorization": f"Bearer {secret}"})
    assert info.status_code == 200
    # `tui sessions` says which node runs it.
    listed = tui("sessions", "--json")
    assert [r["node"] for r in json.loads(listed.stdout) if r["id"] == sid] == ["127.0.0.1"]
    assert f"{sid[:8]}" in (table := tui("sessions").stdout) and "yes, on 127.0.0.1" in table
    assert asyncio.run(status_where(state_dir, sid)) == "ray node 127.0.0.1"  # and the app's status row
    # The commands reach it, from this machine's state dir.
    attached = tui("attach", sid, input="print(2+3)\n", timeout=120)
    assert attached.returncode == 0, attached.stderr
    assert attached.stdout.strip() == "5"
    sent = tui("send", sid, "print(7*6)", "--wait", timeout=120)
    assert sent.returncode == 0 and sent.stdout == "42\n", sent.stderr
    # Stopped: its actor ends with it, so a stopped session costs only storage.
    stopped = tui("stop", sid, timeout=120)
    assert stopped.returncode == 0, stopped.stderr
    assert cluster.where(sid) is None


def test_an_idle_worker_ends_with_its_actor(
    cluster: Any, on_ray: Path, state_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The front door's TUI_* settings reach the worker on its node (here its idle timeout).
    monkeypatch.setenv("TUI_IDLE_TIMEOUT", "1")
    out = tui("send", "--new", "--dir", str(on_ray), "print(6*7)", "--wait", timeout=240)
    assert out.returncode == 0 and out.stdout == "42\n", out.stderr
    sid = out.stderr.strip().splitlines()[0]
    paths = StatePaths(state_dir).session(sid)
    wait_until(lambda: '"worker_leaving"' in paths.journal.read_text(), "the idle worker to leave")
    wait_until(lambda: cluster.where(sid) is None, "its actor to end")
    # An attach starts it again, on a node of the cluster.
    attached = tui("attach", sid, input="print(6*7)\n", timeout=240)
    assert attached.returncode == 0 and attached.stdout.strip() == "42", attached.stderr


def test_a_session_comes_back_on_another_node_when_its_node_dies(
    cluster: Any, on_ray: Path, state_dir: Path
) -> None:
    out = tui("send", "--new", "--dir", str(on_ray), "x = 1", "--wait", timeout=240)
    assert out.returncode == 0, out.stderr
    sid = out.stderr.strip().splitlines()[0]
    node = cluster.where(sid)
    assert node in cluster.nodes[1:]
    # A turn runs, streaming output, when its node dies.
    started = tui("send", sid, 'import time\nprint("running", flush=True)\ntime.sleep(3600)', timeout=120)
    assert started.returncode == 0, started.stderr
    wait_until(lambda: any('"running' in json.dumps(e) for e in events(state_dir, sid)), "the turn's output")
    cluster.kill(node)

    def came_back() -> bool:
        return any(e["type"] == "worker_started" and e.get("lost") for e in events(state_dir, sid))

    wait_until(came_back, "a new worker on another node", timeout=120)
    ended = [e for e in events(state_dir, sid) if e["type"] == "turn_ended"]
    assert ended[-1]["outcome"] == "failed" and ended[-1]["error"].startswith(LOST)
    # The next prompt runs on another node; the journal lost and repeated nothing.
    sent = tui("send", sid, "print(6*7)", "--wait", timeout=240)
    assert sent.returncode == 0 and sent.stdout == "42\n", sent.stderr
    assert cluster.where(sid) not in (None, node)
    seqs = journal_seqs(state_dir, sid)
    assert seqs == list(range(seqs[0], seqs[0] + len(seqs)))
    assert os.path.exists(StatePaths(state_dir).session(sid).secret)


def test_tui_web_on_the_cluster_serves_its_sessions(
    cluster: Any, on_ray: Path, state_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`tui web --ray ADDRESS` on the cluster's state dir is its front door (config.toml names no
    engine): a client of another state dir creates a session through it (its worker in an actor
    on a node) and follows its turns, reaching the worker over TCP with the session's secret."""
    from web.conftest import start_web

    door = tmp_path / "door"
    door.mkdir()
    (door / "config.toml").write_text("[cluster]\nresources = { sessions = 0.01 }\n")
    monkeypatch.setenv("TUI_CONFIG_DIR", str(door))
    web = start_web(state_dir, "--ray", cluster.address)
    try:
        client = tmp_path / "client"
        client.mkdir()
        (client / "cluster.token").write_text(web.token + "\n")
        add_remote(StatePaths(client), Remote("cluster", web.url, str(client / "cluster.token")))
        monkeypatch.setenv("TUI_STATE_DIR", str(client))
        out = tui(
            "--remote", "cluster", "send", "--new", "--dir", str(on_ray), "print(6*7)", "--wait", timeout=240
        )
        assert out.returncode == 0 and out.stdout == "42\n", out.stderr
        sid = out.stderr.strip().splitlines()[0]
        assert cluster.where(sid) in cluster.nodes[1:]
        # As from another machine than the worker's: its Unix socket is out of reach, its TCP
        # port with the session's secret is what the front door uses.
        StatePaths(state_dir).session(sid).socket.unlink()
        attached = tui("--remote", "cluster", "attach", sid, input="print(2+3)\n", timeout=120)
        assert attached.returncode == 0 and attached.stdout.strip() == "5", attached.stderr
    finally:
        web.stop()
