"""Limits end a program with an `error` result naming the limit; the session lives on."""

from __future__ import annotations

from pathlib import Path

from tui.codemode import Limits, ProgramResult, PythonSession


async def run(workdir: Path, source: str, **limits: object) -> tuple[ProgramResult, PythonSession]:
    session = PythonSession(workdir, Limits(observe_seconds=10.0, **limits))  # type: ignore[arg-type]
    await session.start()
    return await session.execute(source=source), session


def assert_limit(result: ProgramResult, name: str) -> None:
    assert result.status == "error", result
    assert result.error is not None
    assert result.error.type == "LimitExceeded", result.error
    assert result.error.limit == name
    assert str(result.error).startswith(f"LimitExceeded: {name}: ")


async def test_wall_seconds(workdir: Path) -> None:
    result, session = await run(workdir, "kept = 1\nwhile True:\n    pass", wall_seconds=0.3)
    try:
        assert_limit(result, "wall")
        assert (await session.execute(source="kept")).value == 1
    finally:
        await session.close()


async def test_cpu_seconds_counts_per_program(workdir: Path) -> None:
    result, session = await run(workdir, "x = 0\nwhile True:\n    x += 1", cpu_seconds=0.3)
    try:
        assert_limit(result, "cpu")
        # a second program gets its own allowance, and sleeping costs none
        again = await session.execute(source="import time\ntime.sleep(0.5)\n'slept'")
        assert again.value == "slept"
    finally:
        await session.close()


async def test_allocating_4_gib_is_refused(workdir: Path) -> None:
    result, session = await run(workdir, "kept = 2\nblock = bytearray(4 * 1024**3)")
    try:
        assert_limit(result, "memory")
        assert (await session.execute(source="kept")).value == 2
    finally:
        await session.close()


async def test_memory_limit_is_configurable(workdir: Path) -> None:
    result, session = await run(workdir, "block = bytearray(300 * 1024**2)", memory_bytes=256 * 1024**2)
    try:
        assert_limit(result, "memory")
    finally:
        await session.close()


async def test_printing_50_mb_ends_with_the_output_limit(workdir: Path) -> None:
    source = "kept = 3\nchunk = 'x' * 1023 + '\\n'\nfor _ in range(50 * 1024):\n    print(chunk, end='')"
    result, session = await run(workdir, source)
    try:
        assert_limit(result, "output")
        assert len(result.output) <= 32 * 1024**2
        assert result.output.startswith("xxx")
        assert (await session.execute(source="kept")).value == 3
    finally:
        await session.close()


async def test_output_limit_counts_fd_writes_too(workdir: Path) -> None:
    source = "import os\nwhile True:\n    os.write(1, b'y' * 65536)"
    result, session = await run(workdir, source, max_output_bytes=1024**2)
    try:
        assert_limit(result, "output")
        assert len(result.output) == 1024**2
    finally:
        await session.close()


async def test_max_output_tokens_never_fails_a_program(workdir: Path) -> None:
    result, session = await run(workdir, "print('z' * 10000)\n'ok'")
    await session.close()
    assert result.value == "ok"
    async with PythonSession(workdir) as short:
        bounded = await short.execute(source="print('z' * 10000)\n'ok'", max_output_tokens=10)
        assert bounded.status == "completed" and bounded.value == "ok"
        assert "characters left out" in bounded.output


async def test_open_files(workdir: Path) -> None:
    source = "handles = [open(f'f{i}', 'w') for i in range(400)]"
    result, session = await run(workdir, source, open_files=64)
    try:
        assert_limit(result, "open_files")
    finally:
        await session.close()


async def test_file_size(workdir: Path) -> None:
    source = "with open('big.bin', 'wb') as f:\n    f.write(b'0' * (3 * 1024**2))"
    result, session = await run(workdir, source, file_size_bytes=1024**2)
    try:
        assert_limit(result, "file_size")
        assert (workdir / "big.bin").stat().st_size <= 1024**2
    finally:
        await session.close()


async def test_cpu_seconds_stops_code_that_holds_the_gil(workdir: Path, mechanism: str) -> None:
    limits = Limits(observe_seconds=20.0, cpu_seconds=0.3)
    async with PythonSession(workdir, limits, mechanism=mechanism) as session:  # type: ignore[arg-type]
        # one C call that never returns to the interpreter loop: no thread of the runner can run
        result = await session.execute(source="sum(range(10**12))")
        assert_limit(result, "cpu")
        assert (await session.execute(source="'next'")).value == "next"
