"""Sessions on a Ray cluster beside the same on this machine's own workers (docs/performance.md,
Sessions on a Ray cluster).

A real three-node Ray cluster on loopback (tests/ray_cluster.py: head plus two nodes that run
sessions, every process stopped by its pid at the end) and a state dir under /tmp:

- a new session's first turn, ``tui send --new 'print(1)' --wait``, with ``[cluster] engine =
  "ray"`` beside ``engine = "local"`` (the Ray one joins the cluster as a driver each time);
- starting a stopped session's worker in process (`RayEngine.start` beside `LocalEngine.start`,
  the driver joined once before);
- a turn's round trip on a live worker, ``tui send ID 'print(1)' --wait`` (over the node's TCP
  port with the session's secret beside the Unix socket);
- from a session's node killed to the session answering a turn again on another node (a node is
  added back after each kill).

``.venv/bin/python bench/cluster.py [RUNS] [KILLS]`` (5 and 3 by default); needs ``tui[cluster]``.
"""

from __future__ import annotations

import asyncio
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))

from ray_cluster import RayCluster  # noqa: E402

from tui.link.engine import LocalEngine  # noqa: E402
from tui.link.ray import RayEngine  # noqa: E402
from tui.store import StatePaths, create_session, is_live  # noqa: E402


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


def main() -> None:
    runs = int(sys.argv[1]) if len(sys.argv) > 1 else 5
    kills = int(sys.argv[2]) if len(sys.argv) > 2 else 3
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

        started = asyncio.run(engine_starts(env, cluster.address, work, runs))
        row("a stopped session's worker started (engine)", started["ray"], started["local"])

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
) -> dict[str, list[float]]:
    """`start` of a new session's worker through each engine, in this process."""
    took: dict[str, list[float]] = {"ray": [], "local": []}
    for key, value in env["ray"].items():
        if key.startswith(("TUI_", "RAY_")):
            os.environ[key] = value
    ray_state = StatePaths(Path(env["ray"]["TUI_STATE_DIR"]))
    local_state = StatePaths(Path(env["local"]["TUI_STATE_DIR"]))
    engines = {"ray": RayEngine(ray_state, address, {"sessions": 0.01}), "local": LocalEngine(local_state)}
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
    await engines["ray"].stop(warm.id, again="")
    return took


if __name__ == "__main__":
    main()
