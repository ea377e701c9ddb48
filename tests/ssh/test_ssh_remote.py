"""`tui remote add NAME ssh://…` and every session command through a real OpenSSH server."""

from __future__ import annotations

from .conftest import Machines


def test_send_new_wait_prints_42_on_the_remote(machines: Machines) -> None:
    added = machines.add_lab()
    assert "remote lab: ssh://root@127.0.0.1" in added.out and "over ssh" in added.out

    sent = machines.run(
        "--remote", "lab", "send", "--new", "--dir", str(machines.work), "print(6*7)", "--wait"
    )
    assert sent.code == 0, sent.err
    assert sent.out == "42\n"
    sid = sent.err.splitlines()[0].strip()
    # The session is the other machine's, not this one's.
    assert (machines.there / "sessions" / sid).is_dir()
    assert not (machines.here / "sessions").exists() or not (machines.here / "sessions" / sid).exists()

    listed = machines.run("--remote", "lab", "sessions")
    assert listed.code == 0 and sid[:8] in listed.out
    shown = machines.run("--remote", "lab", "transcript", sid[:8])
    assert shown.code == 0 and "42" in shown.out
    stopped = machines.run("--remote", "lab", "stop", sid[:8])
    assert stopped.code == 0 and "tui --remote lab attach" in stopped.err
