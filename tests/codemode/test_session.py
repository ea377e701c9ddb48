"""The Code Mode contract, against the real sandbox: results, output, errors, lifecycle."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

import pytest
from helpers import eventually

from tui.codemode import (
    Limits,
    NoActiveProgram,
    ProgramActive,
    ProgramResult,
    PythonSession,
    RunContext,
    SandboxError,
    SessionBusy,
    Tool,
)
from tui.codemode.sandbox import INTERPRETER_FLAGS, SITE_SCRIPT


async def run_out(session: PythonSession, first: ProgramResult) -> tuple[str, ProgramResult]:
    """Collect every result's output until the program ends; return it with the last result."""
    output, result = first.output, first
    while result.status == "still_working":
        result = await session.wait()
        output += result.output
    return output, result


class TestResults:
    async def test_final_expression_is_the_value_and_not_printed(self, session: PythonSession) -> None:
        result = await session.execute(source="x = 20\nprint('working')\nx * 2 + 2")
        assert result.status == "completed"
        assert result.value == 42
        assert result.value_repr == "42"
        assert result.output == "working\n"

    async def test_value_is_json_compatible_else_its_repr(self, session: PythonSession) -> None:
        plain = await session.execute(source="{'a': [1, 2.5, None, True, 'x']}")
        assert plain.value == {"a": [1, 2.5, None, True, "x"]}
        other = await session.execute(source="(1, {2})")
        assert other.value == "(1, {2})"
        assert other.value_repr == "(1, {2})"
        keyed = await session.execute(source="{1: 'one'}")
        assert keyed.value == "{1: 'one'}"

    async def test_no_final_expression_gives_no_value(self, session: PythonSession) -> None:
        assert (await session.execute(source="x = 1")).value is None
        none = await session.execute(source="None")
        assert none.value is None and none.value_repr is None
        assert (await session.execute(source="")).status == "completed"

    async def test_stdout_stderr_and_fd_output_arrive_in_order(self, session: PythonSession) -> None:
        source = (
            "import os, sys, subprocess\n"
            "print('one')\n"
            "print('two', file=sys.stderr)\n"
            "sys.stdout.flush()\n"
            "os.write(1, b'three\\n')\n"
            "subprocess.run(['echo', 'four'], check=True)\n"
            "sys.stdout.buffer.write(b'five\\n')\n"
        )
        result = await session.execute(source=source)
        assert result.status == "completed", result.error
        assert result.output == "one\ntwo\nthree\nfour\nfive\n"

    async def test_output_decodes_utf8_split_across_writes(self, session: PythonSession) -> None:
        source = (
            "import sys\n"
            "b = 'héllo ✓'.encode()\n"
            "for i in range(len(b)):\n"
            "    sys.stdout.buffer.write(b[i : i + 1])\n"
            "    sys.stdout.flush()\n"
        )
        result = await session.execute(source=source)
        assert result.output == "héllo ✓"

    async def test_globals_persist_between_programs(self, session: PythonSession) -> None:
        await session.execute(
            source="import math\ncounter = 1\ndef bump():\n    global counter\n    counter += 1"
        )
        await session.execute(source="bump()")
        result = await session.execute(source="counter, math.pi > 3")
        assert result.value == [2, True]

    async def test_frame_is_visible_as_FRAME(self, session: PythonSession) -> None:
        result = await session.execute(source="FRAME['turn'] + 1", frame={"turn": 6})
        assert result.value == 7
        assert (await session.execute(source="FRAME")).value is None

    async def test_program_runs_in_the_working_folder(self, session: PythonSession, workdir: Path) -> None:
        result = await session.execute(source="import os\nopen('made.txt', 'w').write('hi')\nos.getcwd()")
        assert result.value == str(workdir)
        assert (workdir / "made.txt").read_text() == "hi"


class TestErrors:
    async def test_exception_is_an_error_result_with_the_program_frames(self, session: PythonSession) -> None:
        source = "print('before')\ndef explode(n):\n    raise ValueError(f'bad {n}')\nexplode(3)\n"
        result = await session.execute(source=source)
        assert result.status == "error"
        assert result.output == "before\n"
        assert result.error is not None
        assert (result.error.type, result.error.message) == ("ValueError", "bad 3")
        assert str(result.error) == "ValueError: bad 3"
        trace = result.error.traceback
        assert trace.startswith("Traceback (most recent call last):")
        assert "line 4, in <module>" in trace and "line 3, in explode" in trace
        assert "raise ValueError(f'bad {n}')" in trace
        assert "_child" not in trace and "codemode" not in trace
        assert trace.rstrip().endswith("ValueError: bad 3")

    async def test_syntax_error_is_an_error_result(self, session: PythonSession) -> None:
        result = await session.execute(source="def broken(:\n    pass")
        assert result.status == "error"
        assert result.error is not None and result.error.type == "SyntaxError"
        assert "_child" not in result.error.traceback

    async def test_state_survives_an_error(self, session: PythonSession) -> None:
        await session.execute(source="kept = 'yes'")
        await session.execute(source="1 / 0")
        assert (await session.execute(source="kept")).value == "yes"

    async def test_sys_exit(self, session: PythonSession) -> None:
        assert (await session.execute(source="import sys\nprint('bye')\nsys.exit()")).status == "completed"
        failed = await session.execute(source="import sys\nsys.exit(3)")
        assert failed.status == "error" and failed.error is not None and failed.error.type == "SystemExit"

    async def test_a_dying_interpreter_raises_and_the_next_program_gets_a_fresh_one(
        self, session: PythonSession
    ) -> None:
        await session.execute(source="lost = 1")
        with pytest.raises(SandboxError, match="variables were lost"):
            await session.execute(source="import os\nos._exit(9)")
        result = await session.execute(source="'lost' in globals()")
        assert result.value is False


# A program that runs until the test opens its gate (a file in the working folder), so it
# outlives an observation however slowly a loaded machine runs the test.
GATE = "import os, time\nwhile not os.path.exists('gate'):\n    time.sleep(0.01)\n"


class TestObservation:
    async def test_still_working_then_incremental_output_nothing_twice(
        self, quick: PythonSession, workdir: Path
    ) -> None:
        source = (
            "for i in range(3):\n    print(i, flush=True)\n"
            + GATE
            + "for i in range(3, 6):\n    print(i)\n'done'"
        )
        first = await quick.execute(source=source)
        assert first.status == "still_working"
        (workdir / "gate").touch()
        output, last = await run_out(quick, first)
        assert output == "".join(f"{i}\n" for i in range(6))
        assert last.status == "completed" and last.value == "done"

    async def test_still_working_keeps_the_program_active(self, quick: PythonSession, workdir: Path) -> None:
        finishing = asyncio.Event()

        async def finished() -> None:
            finishing.set()

        tool = Tool(
            "finished", "says the program is about to end", {"type": "object", "properties": {}}, finished
        )
        first = await quick.execute(source=GATE + "finished()\n5", catalog=[tool])
        assert first.status == "still_working"
        with pytest.raises(ProgramActive):
            await quick.execute(source="1")
        (workdir / "gate").touch()
        await asyncio.wait_for(finishing.wait(), 30)
        # it ends meanwhile, but stays active until observed
        with pytest.raises(ProgramActive):
            await quick.execute(source="1")
        _, result = await run_out(quick, await quick.wait())
        assert (result.status, result.value) == ("completed", 5)
        with pytest.raises(NoActiveProgram):
            await quick.wait()

    async def test_wait_and_stop_without_program(self, session: PythonSession) -> None:
        with pytest.raises(NoActiveProgram):
            await session.wait()
        with pytest.raises(NoActiveProgram):
            await session.stop()

    async def test_overlapping_operations_are_rejected_at_once(self, quick: PythonSession) -> None:
        await quick.execute(source="import time\ntime.sleep(30)")
        waiting = asyncio.create_task(quick.wait())
        await asyncio.sleep(0)
        with pytest.raises(SessionBusy):
            await quick.stop()
        with pytest.raises(SessionBusy):
            await quick.execute(source="1")
        assert (await waiting).status == "still_working"
        assert (await quick.stop()).status == "terminated"

    async def test_max_output_tokens_bounds_one_result(self, session: PythonSession) -> None:
        source = "for i in range(2000):\n    print(f'line {i:04d}')"
        result = await session.execute(source=source, max_output_tokens=50)
        assert len(result.output) <= 200
        assert result.output.startswith("line 0000\n")
        assert result.output.endswith("line 1999\n")
        assert result.output.count("characters left out") == 1
        assert result.status == "completed"


class TestStop:
    async def test_stop_interrupts_and_keeps_state(self, quick: PythonSession) -> None:
        source = "state = 'kept'\nprint('started', flush=True)\nwhile True:\n    pass"
        first = await quick.execute(source=source)
        assert first.status == "still_working"
        stopped = await quick.stop()
        assert stopped.status == "terminated"
        assert (first.output + stopped.output) == "started\n"
        assert "variables were lost" not in stopped.output
        assert (await quick.execute(source="state")).value == "kept"

    async def test_stop_a_sleeping_program(self, quick: PythonSession) -> None:
        await quick.execute(source="import time\ntime.sleep(60)")
        assert (await quick.stop()).status == "terminated"
        assert (await quick.execute(source="2")).value == 2

    async def test_stop_kills_a_program_that_ignores_the_interrupt(self, quick: PythonSession) -> None:
        source = (
            "state = 'doomed'\n"
            "while True:\n"
            "    try:\n"
            "        while True:\n"
            "            pass\n"
            "    except KeyboardInterrupt:\n"
            "        pass\n"
        )
        assert (await quick.execute(source=source)).status == "still_working"
        stopped = await quick.stop()
        assert stopped.status == "terminated"
        assert "variables were lost" in stopped.output
        assert (await quick.execute(source="'state' in globals()")).value is False

    async def test_output_printed_while_stopping_is_kept(self, quick: PythonSession) -> None:
        source = "import time\ntry:\n    time.sleep(60)\nfinally:\n    print('cleaned up')"
        await quick.execute(source=source)
        assert (await quick.stop()).output == "cleaned up\n"


class TestContext:
    async def test_cancelled_context_terminates_execute(self, session: PythonSession) -> None:
        context = RunContext()
        asyncio.get_running_loop().call_later(0.2, context.cancel)
        result = await session.execute(source="import time\ntime.sleep(60)", context=context)
        assert result.status == "terminated"
        assert (await session.execute(source="3")).value == 3

    async def test_cancel_from_another_thread_terminates_wait(self, quick: PythonSession) -> None:
        context = RunContext()
        await quick.execute(source="while True:\n    pass", context=context)
        threading.Timer(0.05, context.cancel).start()
        result = await quick.wait(context=context)
        while result.status == "still_working":
            result = await quick.wait(context=context)
        assert result.status == "terminated"

    async def test_context_cancelled_before_execute(self, session: PythonSession) -> None:
        context = RunContext()
        context.cancel()
        result = await session.execute(source="print('never')", context=context)
        assert result.status == "terminated"
        assert result.output == ""

    async def test_cancel_of_a_stubborn_program_answers_now_and_replaces_later(
        self, session: PythonSession
    ) -> None:
        context = RunContext()
        source = (
            "x = 1\n"
            "while True:\n"
            "    try:\n"
            "        while True:\n"
            "            x += 1\n"
            "    except KeyboardInterrupt:\n"
            "        pass\n"
        )
        asyncio.get_running_loop().call_later(0.1, context.cancel)
        result = await session.execute(source=source, context=context)
        assert result.status == "terminated"
        after = await session.execute(source="'x' in globals()")
        assert after.value is False
        assert "variables were lost" in after.output


class TestLifecycle:
    async def test_close_is_idempotent_and_ends_a_running_program(self, workdir: Path) -> None:
        session = PythonSession(workdir, Limits(observe_seconds=0.1))
        await session.start()
        assert session.sandbox
        await session.execute(source="import time\ntime.sleep(60)")
        await session.close()
        await session.close()
        with pytest.raises(SandboxError):
            await session.execute(source="1")

    async def test_a_thread_printing_between_programs_reaches_the_next_result(
        self, session: PythonSession, workdir: Path
    ) -> None:
        # between programs the runner's output pump sleeps until something is written
        started = await session.execute(
            source="import os, threading, time\n"
            "def later():\n"
            "    while not os.path.exists('go'):\n"
            "        time.sleep(0.01)\n"
            "    print('written while idle')\n"
            "threading.Thread(target=later, daemon=True).start()"
        )
        assert started.status == "completed" and started.output == ""
        (workdir / "go").write_text("")
        await eventually(lambda: session._stray, "the idle thread's output to arrive")
        assert (await session.execute(source="1")).output == "written while idle\n"

    async def test_missing_workdir_is_a_sandbox_error(self, tmp_path: Path) -> None:
        with pytest.raises(SandboxError, match="does not exist"):
            await PythonSession(tmp_path / "nowhere").start()

    async def test_missing_bubblewrap_is_a_sandbox_error(self, tmp_path: Path) -> None:
        with pytest.raises(SandboxError, match="bubblewrap"):
            await PythonSession(tmp_path, bwrap="/nonexistent/bwrap", mechanism="bubblewrap").start()

    async def test_execute_starts_the_session_when_needed(self, workdir: Path) -> None:
        session = PythonSession(workdir)
        try:
            assert (await session.execute(source="6 * 7")).value == 42
        finally:
            await session.close()


class TestIdleMemory:
    async def test_an_idle_interpreter_holds_no_event_loop_or_traceback_machinery(
        self, session: PythonSession
    ) -> None:
        """asyncio (6 MiB of every session), inspect, traceback and typing are imported by the
        first program that needs them (a top-level ``await``, an error), not by the runner; ast
        (0.6 MiB) and platform by none (the builtin _ast compiles, the version is sys.version's)."""
        # nor pathlib, ipaddress and urllib, which tui's own editable-install finder (``pip
        # install -e .``) imports: the runner processes the venv's .pth files all but that one
        names = "('asyncio', 'inspect', 'traceback', 'typing', 'ast', 'platform', 'pathlib', 'ipaddress', "
        names += "'urllib')"
        held = f"sorted(m for m in {names} if m in sys.modules)"
        result = await session.execute(source=f"import sys\nprint(1)\n{held}")
        assert (result.status, result.output, result.value) == ("completed", "1\n", [])
        failed = await session.execute(source="1 / 0")
        assert failed.status == "error" and "ZeroDivisionError" in failed.error.traceback  # type: ignore[union-attr]
        awaited = await session.execute(source="import asyncio\nawait asyncio.sleep(0)\n6 * 7")
        assert awaited.value == 42


class TestSitePackages:
    async def test_a_program_imports_what_the_venv_has_installed(self, session: PythonSession) -> None:
        """The runner adds the venv's site-packages itself (the interpreter starts with -S)."""
        source = "import sys, platformdirs\n"
        source += "(sys.prefix, platformdirs.__file__.startswith(sys.prefix), callable(exit))"
        result = await session.execute(source=source)
        assert (result.status, result.value) == ("completed", [sys.prefix, True, True])

    def test_every_pth_file_is_processed_as_site_does_but_tui_own_editable_finder(
        self, tmp_path: Path
    ) -> None:
        """In a venv of its own, against ``site`` at start-up: path lines that exist are added, import
        lines run in sorted name order, another project's editable install imports; tui's own
        ``.pth`` is passed over."""
        venv = tmp_path / "venv"
        (venv / "bin").mkdir(parents=True)
        (venv / "bin" / "python").symlink_to(os.path.realpath(sys.executable))
        (venv / "pyvenv.cfg").write_text("include-system-site-packages = false\n")
        packages = venv / "lib" / f"python{sys.version_info[0]}.{sys.version_info[1]}" / "site-packages"
        (packages / "installed").mkdir(parents=True)
        (packages / "installed" / "__init__.py").write_text("")
        (tmp_path / "other_src").mkdir()
        (tmp_path / "other_src" / "other.py").write_text("")
        seen = "import sys; sys.seen = [*getattr(sys, 'seen', []), {!r}]\n"
        (packages / "__editable__.tui-0.1.0.pth").write_text(seen.format("tui"))
        (packages / "__editable__.other-1.0.pth").write_text(
            f"{tmp_path / 'other_src'}\n" + seen.format("other")
        )
        (packages / "zz.pth").write_text(f"# a comment\n{tmp_path / 'missing'}\n" + seen.format("zz"))
        probe = (
            "import importlib.util, json, sys\n"
            "if sys.flags.no_site:\n"
            f"    spec = importlib.util.spec_from_file_location('site_start', {str(SITE_SCRIPT)!r})\n"
            "    start = importlib.util.module_from_spec(spec)\n"
            "    spec.loader.exec_module(start)\n"
            "    start.start_site()\n"
            "import installed, other\n"
            "print(json.dumps([sys.prefix, sys.path, sys.seen, callable(exit)]))"
        )

        def started(*flags: str) -> Any:
            command = [str(venv / "bin" / "python"), *flags, "-c", probe]
            done = subprocess.run(command, capture_output=True, text=True, timeout=60)
            assert done.returncode == 0, done.stderr
            return json.loads(done.stdout)

        prefix, path, seen_by_site, exits = started("-I")
        assert (prefix, exits) == (str(venv), True) and "tui" in seen_by_site
        assert str(tmp_path / "other_src") in path and str(tmp_path / "missing") not in path
        without_tui = [name for name in seen_by_site if name != "tui"]
        assert without_tui[:2] == ["other", "zz"]
        assert started(*INTERPRETER_FLAGS) == [prefix, path, without_tui, True]


class TestAwait:
    async def test_top_level_await_runs_on_a_loop_that_persists(self, session: PythonSession) -> None:
        first = await session.execute(
            source=(
                "import asyncio\n"
                "async def twice(x):\n"
                "    await asyncio.sleep(0.01)\n"
                "    return 2 * x\n"
                "await twice(4)"
            )
        )
        assert (first.status, first.value) == ("completed", 8)
        second = await session.execute(source="results = await asyncio.gather(twice(1), twice(2))\nresults")
        assert second.value == [2, 4]

    async def test_an_error_under_await_shows_only_the_program_frames(self, session: PythonSession) -> None:
        source = (
            "import asyncio\n"
            "async def bad():\n"
            "    await asyncio.sleep(0)\n"
            "    raise KeyError('k')\n"
            "await bad()"
        )
        result = await session.execute(source=source)
        assert result.error is not None and result.error.type == "KeyError"
        assert result.error.traceback.splitlines()[1].startswith('  File "<program ')
        assert "asyncio" not in result.error.traceback.split("\n", 2)[1]

    async def test_stop_interrupts_an_awaiting_program(self, quick: PythonSession) -> None:
        first = await quick.execute(source="import asyncio\nmarker = 'kept'\nawait asyncio.sleep(60)")
        assert first.status == "still_working"
        assert (await quick.stop()).status == "terminated"
        assert (await quick.execute(source="marker")).value == "kept"


async def test_a_program_writing_into_the_runner_pipe_only_breaks_its_own_interpreter(
    session: PythonSession,
) -> None:
    with pytest.raises(SandboxError):
        await session.execute(
            source=(
                "import os\n"
                "for fd in range(3, 64):\n"
                "    try:\n"
                "        os.write(fd, b'\\xff' * 64)\n"
                "    except OSError:\n"
                "        pass\n"
            )
        )
    assert (await session.execute(source="'fresh'")).value == "fresh"


async def test_a_forked_child_runs_on_and_exits_without_speaking_for_the_program(
    session: PythonSession,
) -> None:
    source = (
        "import os\n"
        "pid = os.fork()\n"
        "if pid == 0:\n"
        "    print('from the child', flush=True)\n"
        "    raise ValueError('child failed')\n"
        "status = os.waitpid(pid, 0)[1]\n"
        "print('parent saw', status >> 8)\n"
        "'parent'"
    )
    result = await session.execute(source=source)
    assert (result.status, result.value) == ("completed", "parent")
    assert "from the child\n" in result.output
    assert "ValueError: child failed" in result.output
    assert result.output.endswith("parent saw 1\n")
    assert (await session.execute(source="1 + 1")).value == 2


async def test_output_of_a_process_left_running_arrives_with_the_next_program(quick: PythonSession) -> None:
    source = "import subprocess\nsubprocess.Popen(['sh', '-c', 'sleep 0.3; echo late'])\n'started'"
    first = await quick.execute(source=source)
    assert first.value == "started"
    collected = ""
    async with asyncio.timeout(30):
        while "late" not in collected:
            result = await quick.execute(source="import time\ntime.sleep(0.05)")
            collected += result.output
    assert collected == "late\n"
