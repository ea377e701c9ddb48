"""Tried as an attacker would: a session's ACP agent and its programs cannot reach this machine's
SSH connections to its remotes (the ControlMaster's socket would run commands there as the remote
user; the socket forwarded to the remote's relay drives its sessions as their owner, with no token).

A real connection to a remote over the real sshd on loopback is live in this process; then a real
ACP agent subprocess (`tests/acp_agent.py`) and a program in the sandbox, each in a session of this
machine, look where sockets are kept (the temporary folder, tui's socket folders, the runtime
folder) and use what they find and the very paths the connection uses.
"""

from __future__ import annotations

import inspect
import json
import os
import subprocess
from pathlib import Path

from acp_agent import configure, reach_ssh

from tui.link import ssh as ssh_link

from .conftest import TIMEOUT, TUI, Machines


def _results(out: str) -> dict[str, str]:
    line = next(line for line in out.splitlines() if line.startswith("ssh results: "))
    results: dict[str, str] = json.loads(line.removeprefix("ssh results: "))
    return results


def test_an_agent_and_a_program_cannot_reach_this_machines_ssh_connections(
    machines: Machines, tmp_path: Path
) -> None:
    machines.add_lab()
    sent = machines.run(
        "--remote", "lab", "send", "--new", "--dir", str(machines.work), "print(6*7)", "--wait"
    )
    assert sent.code == 0, sent.err
    (tunnel,) = ssh_link._TUNNELS.values()
    control, relay = tunnel._paths()
    assert len(os.fsencode(control)) + len(".0123456789abcdef") <= 107
    targets = {
        "control": str(control),
        "relay": str(relay),
        "destination": "root@127.0.0.1",
        "port": str(machines.sshd.port),
    }
    # This process (which made the connection) reaches both: the attempts work where they may.
    own = reach_ssh(targets)
    assert own[f"ssh run id {control}"] == "done: 0", own
    assert own[f"relay {relay}"].startswith("done: HTTP/1.1 200"), own

    config = tmp_path / "config"
    config.mkdir()
    configure(config, tmp_path / "agent-state")
    env = {**os.environ, "TUI_STATE_DIR": str(machines.here), "TUI_CONFIG_DIR": str(config)}

    def send(*args: str) -> dict[str, str]:
        ran = subprocess.run(
            [TUI, "send", "--new", "--dir", str(machines.work), *args, "--wait"],
            env=env,
            cwd=machines.work,
            capture_output=True,
            text=True,
            timeout=3 * TIMEOUT,
            check=False,
        )
        assert ran.returncode == 0, ran.stderr
        return _results(ran.stdout)

    program = (
        inspect.getsource(reach_ssh)
        + f"\nimport json\nprint('ssh results: ' + json.dumps(reach_ssh({targets!r})))\n"
    )
    for who, results in (
        ("agent", send("--agent", "tester", "reach ssh " + json.dumps(targets))),
        ("program", send(program)),
    ):
        assert results.pop("found") == "", (who, results)
        worked = {name: outcome for name, outcome in results.items() if outcome.startswith("done")}
        assert not worked, (who, worked)
        assert f"ssh run id {control}" in results and f"relay {relay}" in results, (who, results)
