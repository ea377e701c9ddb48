"""Sessions on a Ray cluster beside the same on this machine's own workers (docs/performance.md,
Sessions on a Ray cluster).

A real three-node Ray cluster on loopback (tests/ray_cluster.py: head plus two nodes that run
sessions, every process stopped by its pid at the end) and a state dir under /tmp:

- a new session's first turn, ``tui send --new 'print(1)' --wait``, with ``[cluster] engine =
  "ray"`` beside ``engine = "local"`` (the Ray one joins the cluster as a driver each time);
- starting a stopped session's worker in process (`RayEngine.start` beside `LocalEngine.start`,
  the driver joined once before);
- sessions created per second: a record made and its worker started through the engine, ten one
  after another and ten at once;
- a turn's round trip on a live worker, ``tui send ID 'print(1)' --wait`` (over the node's TCP
  port with the session's secret beside the Unix socket);
- the same turn through a front door, ``tui --remote NAME send ID 'print(1)' --wait``: ``tui web``
  on the cluster's state dir beside ``tui web`` on one machine's;
- the list of 100 sessions (the live ones above and stored ones): ``tui sessions`` and the front
  door's ``GET /api/sessions``;
- from a session's node killed to the session answering a turn again on another node (a node is
  added back after each kill), and whether the journal is whole (no event lost or repeated).

``.venv/bin/python bench/cluster.py [RUNS] [KILLS]`` (5 and 10 by default); needs ``tui[cluster]``.
"""

from __future__ import annotations

import asyncio
import json
import os
import selectors
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))

import httpx  # noqa: E402
from ray_cluster import RayCluster  # noqa: E402

from tui.link.engine import LocalEngine  # noqa: E402
from tui.link.ray import RayEngine  # noqa: E402
from tui.store import StatePaths, create_session, is_live  # noqa: E402
from tui.store.remotes import Remote, add_remote  # noqa: E402

LISTED = 100
BURST = 10


def tui(env: dict[str, str], *args: str) -> tuple[float, str, str]:
    started = time.perf_counter()
    done = subprocess.run(
        [sys.executable, "-m", "tui", *args],
        capture_output=True,
        text=True,
        env=env,
        timeout=600,
        check=False,
    )
    took = time.perf_counter() - started
    if done.returncode != 0:
        raise SystemExit(f"tui {' '.join(args)} failed: {done.stderr}")
    return took, done.stdout, done.stderr


def median_ms(values: list[float]) -> float:
    return statistics.median(values) * 1000


def row(what: str, ray_s: list[float], local_s: list[float]) -> None:
    ray_ms, local_ms = median_ms(ray_s), median_ms(local_s)
    print(f"{what:<46} {ray_ms:9.0f} ms {local_ms:9.0f} ms {ray_ms / local_ms:7.1f}x", flush=True)


def rate_row(what: str, ray_rate: float, local_rate: float) -> None:
    print(f"{what:<46} {ray_rate:8.2f} /s {local_rate:8.2f} /s {ray_rate / local_rate:7.2f}x", flush=True)


def start_web(env: dict[str, str]) -> tuple[subprocess.Popen[str], str, str]:
    """`tui web --port 0` on `env`'s state dir: the process, its URL and its owner token."""
    token_file = Path(env["TUI_STATE_DIR"]) / "owner.token"
    proc = subprocess.Popen(
        [sys.executable, "-m", "tui", "web", "--port", "0", "--token-file", str(token_file)],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    assert proc.stdout is not None
    with selectors.DefaultSelector() as sel:
        sel.register(proc.stdout, selectors.EVENT_READ)
        line = proc.stdout.readline() if sel.select(60) else ""
    if "serving" not in line:
        proc.kill()
        raise SystemExit(f"tui web did not start: {line!r}")
    return proc, line.split()[-1], token_file.read_text().strip()


def main() -> None:
    runs = int(sys.argv[1]) if len(sys.argv) > 1 else 5
    kills = int(sys.argv[2]) if len(sys.argv) > 2 else 10
    with RayCluster() as cluster, tempfile.TemporaryDirectory(prefix="tuib", dir="/tmp") as temp:
        base = Path(temp)
        work = base / "work"
        work.mkdir()
        env: dict[str, dict[str, str]] = {}
        for engine in ("ray", "local"):
            config = base / f"config-{engine}"
            config.mkdir()
            (config / "config.toml").write_text(
                f'[cluster]\nengine = "{engine}"\naddress = "{cluster.address}"\n'
                "resources = { sessions = 0.01 }\n"
            )
            state = base / f"state-{engine}"
            state.mkdir()
            env[engine] = {
                **cluster.env,
                "TUI_CONFIG_DIR": str(config),
                "TUI_STATE_DIR": str(state),
                "TUI_CHECKPOINTS": "off",
            }
        print(f"{'':<46} {'ray':>12} {'local':>12} {'ratio':>8}")
        tui(
            env["ray"], "send", "--new", "--dir", str(work), "print(1)", "--wait"
        )  # Ray's first worker process
        first: dict[str, list[float]] = {"ray": [], "local": []}
        ids: dict[str, list[str]] = {"ray": [], "local": []}
        for _ in range(runs):
            for engine in ("ray", "local"):
                took, _, err = tui(env[engine], "send", "--new", "--dir", str(work), "print(1)", "--wait")
                first[engine].append(took)
                ids[engine].append(err.strip().splitlines()[0])
        row("new session + first turn (tui send --new)", first["ray"], first["local"])

        turn: dict[str, list[float]] = {"ray": [], "local": []}
        for _ in range(runs):
            for engine in ("ray", "local"):
                took, out, _ = tui(env[engine], "send", ids[engine][0], "print(1)", "--wait")
                assert out == "1\n", out
                turn[engine].append(took)
        row("a turn on a live worker (tui send --wait)", turn["ray"], turn["local"])

        started, rates = asyncio.run(engine_starts(env, cluster.address, work, runs))
        row("a stopped session's worker started (engine)", started["ray"], started["local"])
        for what, (ray_rate, local_rate) in rates.items():
            rate_row(what, ray_rate, local_rate)

        webs: dict[str, tuple[subprocess.Popen[str], str, str]] = {}
        client = base / "client"
        client.mkdir()
        client_env = {**env["local"], "TUI_STATE_DIR": str(client)}
        try:
            for engine in ("ray", "local"):
                webs[engine] = start_web(env[engine])
                (client / f"{engine}.token").write_text(webs[engine][2] + "\n")
                add_remote(
                    StatePaths(client), Remote(engine, webs[engine][1], str(client / f"{engine}.token"))
                )
            door: dict[str, list[float]] = {"ray": [], "local": []}
            for engine in ("ray", "local"):  # each front door's first reach of the worker
                tui(client_env, "--remote", engine, "send", ids[engine][0], "print(1)", "--wait")
            for _ in range(runs):
                for engine in ("ray", "local"):
                    took, out, _ = tui(
                        client_env, "--remote", engine, "send", ids[engine][0], "print(1)", "--wait"
                    )
                    assert out == "1\n", out
                    door[engine].append(took)
            row("a turn through tui web (tui --remote send)", door["ray"], door["local"])

            for engine in ("ray", "local"):
                paths = StatePaths(Path(env[engine]["TUI_STATE_DIR"]))
                have = len(list((paths.sessions).iterdir()))
                for _ in range(LISTED - have):
                    create_session(paths, working_directory=work)
            listing: dict[str, list[float]] = {"ray": [], "local": []}
            api: dict[str, list[float]] = {"ray": [], "local": []}
            for _ in range(runs):
                for engine in ("ray", "local"):
                    took, out, _ = tui(env[engine], "sessions", "--all", "--json")
                    assert len(json.loads(out)) == LISTED, len(json.loads(out))
                    listing[engine].append(took)
                    _, url, token = webs[engine]
                    began = time.perf_counter()
                    reply = httpx.get(
                        f"{url}/api/sessions", headers={"Authorization": f"Bearer {token}"}, timeout=60
                    )
                    api[engine].append(time.perf_counter() - began)
                    assert reply.status_code == 200, reply.text
            row(f"the list of {LISTED} sessions (tui sessions --all)", listing["ray"], listing["local"])
            row(f"the list of {LISTED} sessions (GET /api/sessions)", api["ray"], api["local"])
        finally:
            for proc, _, _ in webs.values():
                proc.terminate()
                proc.wait(30)

        print(f"{'':<46} {'kill -> answering again':>24}")
        back: list[float] = []
        sid = ids["ray"][0]
        journal = Path(env["ray"]["TUI_STATE_DIR"]) / "sessions" / sid / "journal.jsonl"
        for _ in range(kills):
            node = cluster.where(sid)
            assert node is not None
            losses = journal.read_text().count('"lost":"')
            killed = time.perf_counter()
            cluster.kill(node)
            while journal.read_text().count('"lost":"') == losses:
                time.sleep(0.05)
            tui(env["ray"], "send", sid, "print(1)", "--wait")
            back.append(time.perf_counter() - killed)
            cluster.add()
        seqs = [json.loads(line)["seq"] for line in journal.read_text().splitlines()]
        whole = seqs == list(range(1, len(seqs) + 1))
        print(
            f"{'node killed -> the session answers a turn':<46} median {median_ms(back):6.0f} ms, "
            f"max {max(back) * 1000:6.0f} ms over {kills} kills; journal whole: {whole}",
            flush=True,
        )
        for engine in ("ray", "local"):
            tui(env[engine], "stop", "--all")


async def engine_starts(
    env: dict[str, dict[str, str]], address: str, work: Path, runs: int
) -> tuple[dict[str, list[float]], dict[str, tuple[float, float]]]:
    """`start` of a new session's worker through each engine, in this process; and sessions
    created (record and worker) per second, one after another and BURST at once."""
    took: dict[str, list[float]] = {"ray": [], "local": []}
    for key, value in env["ray"].items():
        if key.startswith(("TUI_", "RAY_")):
            os.environ[key] = value
    ray_state = StatePaths(Path(env["ray"]["TUI_STATE_DIR"]))
    local_state = StatePaths(Path(env["local"]["TUI_STATE_DIR"]))
    engines: dict[str, LocalEngine | RayEngine] = {
        "ray": RayEngine(ray_state, address, {"sessions": 0.01}),
        "local": LocalEngine(local_state),
    }
    warm = create_session(ray_state, working_directory=work)
    await engines["ray"].start(warm.id, timeout=60.0)  # the driver joins the cluster once
    for _ in range(runs):
        for name, engine in engines.items():
            state = ray_state if name == "ray" else local_state
            record = create_session(state, working_directory=work)
            began = time.perf_counter()
            await engine.start(record.id, timeout=60.0)
            took[name].append(time.perf_counter() - began)
            await engine.stop(record.id, again="")
            assert not is_live(state.session(record.id).lock)
    rates: dict[str, tuple[float, float]] = {}
    for what, together in (
        (f"sessions created, {BURST} one after another", False),
        (f"sessions created, {BURST} at once", True),
    ):
        per: dict[str, float] = {}
        for name, engine in engines.items():
            state = ray_state if name == "ray" else local_state
            began = time.perf_counter()
            if together:
                made = await asyncio.gather(*(make(state, engine, work) for _ in range(BURST)))
            else:
                made = [await make(state, engine, work) for _ in range(BURST)]
            per[name] = BURST / (time.perf_counter() - began)
            await asyncio.gather(*(engine.stop(sid, again="") for sid in made))
        rates[what] = (per["ray"], per["local"])
    await engines["ray"].stop(warm.id, again="")
    return took, rates


async def make(state: StatePaths, engine: LocalEngine | RayEngine, work: Path) -> str:
    """A new session with its worker started."""
    record = await asyncio.to_thread(create_session, state, working_directory=work)
    await engine.start(record.id, timeout=60.0)
    return record.id


if __name__ == "__main__":
    main()
