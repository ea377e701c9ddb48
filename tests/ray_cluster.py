"""A real three-node Ray cluster on this machine's loopback, for tests (``python ray_cluster.py
TEMP``; `RayCluster` runs it).

Every node binds to 127.0.0.1, every port is picked at run time, everything Ray writes is under
TEMP, and every process is stopped by its pid (``ray stop`` would stop every Ray process of the
machine). The head holds the cluster's control store and runs no session; the two other nodes
have the resource ``sessions``, which the tests' ``[cluster] resources`` ask for, so killing
a session's node never takes the cluster down.

Lines on stdin: ``where ID`` prints the node id running session ID's actor (``none``); ``kill
NODE`` kills every process of that node at once, as a lost machine; ``add`` adds a node that
runs sessions and prints its id; ``stop`` (or the end of stdin)
stops the cluster. It prints ``READY {json}`` (address, node ids) once the nodes are up.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from types import TracebackType
from typing import Any

SESSION_RESOURCE = "sessions"


def serve(temp: str) -> None:
    # The answers go to the parent on the stdout it gave; what Ray's processes print, elsewhere.
    answers = os.fdopen(os.dup(1), "w", buffering=1)
    os.dup2(2, 1)
    os.environ["RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER"] = "0"  # loopback stays loopback
    import ray
    from ray.cluster_utils import Cluster

    ray_temp = os.path.join(temp, "ray")
    os.makedirs(ray_temp, exist_ok=True)
    common: dict[str, Any] = {
        "node_ip_address": "127.0.0.1",
        "temp_dir": ray_temp,
        "object_store_memory": 80 * 1024 * 1024,
        "include_dashboard": False,
    }
    # A node that stops answering is declared dead after 3 missed checks 0.5 s apart (Ray's
    # default is 5 checks 3 s apart): the failover's wait is mostly this.
    detect = {
        "health_check_period_ms": 500,
        "health_check_timeout_ms": 500,
        "health_check_failure_threshold": 3,
    }
    cluster = Cluster(
        initialize_head=True, head_node_args={**common, "num_cpus": 1, "_system_config": detect}
    )
    nodes = {cluster.head_node.node_id: cluster.head_node}
    for _ in range(2):
        node = cluster.add_node(**common, num_cpus=1, resources={SESSION_RESOURCE: 1000})
        nodes[node.node_id] = node
    cluster.wait_for_nodes()
    ray.init(address=cluster.address, namespace="tui", log_to_driver=False, logging_level="ERROR")
    print(
        "READY",
        json.dumps({"address": cluster.address, "head": cluster.head_node.node_id, "nodes": list(nodes)}),
        file=answers,
    )
    for line in sys.stdin:
        command, _, arg = line.strip().partition(" ")
        if command == "where":
            try:
                actor = ray.get_actor(f"tui-{arg}", namespace="tui")
                print(ray.get(actor.where.remote(), timeout=60), file=answers)
            except Exception:
                print("none", file=answers)
        elif command == "kill":
            cluster.remove_node(nodes.pop(arg), allow_graceful=False)
            print("killed", file=answers)
        elif command == "add":
            node = cluster.add_node(**common, num_cpus=1, resources={SESSION_RESOURCE: 1000})
            nodes[node.node_id] = node
            print(node.node_id, file=answers)
        elif command == "stop":
            break
    ray.shutdown()
    cluster.shutdown()


class RayCluster:
    """The cluster above, run as a child process; a context manager that stops it."""

    def __init__(self) -> None:
        self.temp = tempfile.mkdtemp(prefix="ray", dir="/tmp")  # short: Ray's socket paths
        self.env = {**os.environ, "RAY_TMPDIR": self.temp, "RAY_USAGE_STATS_ENABLED": "0"}
        self.log = Path(self.temp) / "cluster.log"
        with open(self.log, "wb") as log:
            self.proc = subprocess.Popen(
                [sys.executable, __file__, self.temp],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=log,
                text=True,
                env=self.env,
                start_new_session=True,
            )
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            if line.startswith("READY "):
                ready = json.loads(line.split(" ", 1)[1])
                break
        else:
            code = self.proc.wait()
            raise RuntimeError(f"the Ray cluster did not start (code {code}): {self.log.read_text()[-2000:]}")
        self.address: str = ready["address"]
        self.head: str = ready["head"]
        self.nodes: list[str] = ready["nodes"]

    def ask(self, line: str) -> str:
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self.proc.stdin.write(line + "\n")
        self.proc.stdin.flush()
        return self.proc.stdout.readline().strip()

    def where(self, session_id: str) -> str | None:
        """The node running the session's actor."""
        node = self.ask(f"where {session_id}")
        return None if node == "none" else node

    def kill(self, node: str) -> None:
        """Kill every process of `node` at once."""
        assert self.ask(f"kill {node}") == "killed"

    def add(self) -> str:
        """Add a node that runs sessions; its id."""
        node = self.ask("add")
        self.nodes.append(node)
        return node

    def stop(self) -> None:
        if self.proc.poll() is None:
            assert self.proc.stdin is not None
            self.proc.stdin.close()
            try:
                self.proc.wait(timeout=60)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, 9)
                self.proc.wait()
        shutil.rmtree(self.temp, ignore_errors=True)

    def __enter__(self) -> RayCluster:
        return self

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()


if __name__ == "__main__":
    serve(Path(sys.argv[1]).as_posix())
