"""The import rules of `docs/architecture.md` ("Packages"), checked on every module of `tui`.

The document is the one source of the contract: this file parses its tables and walks the syntax
tree of each module (imports inside functions and under ``TYPE_CHECKING`` included, so a lazy
import cannot hide a broken rule). A failure names the importing module, its line and the rule.
"""

from __future__ import annotations

import ast
import select
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from functools import cache
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
DOC = ROOT / "docs" / "architecture.md"
WHERE = "docs/architecture.md, Packages"

# Known breaks of the contract that are being removed (issue 10): delete each allowance once the
# change that removes it is merged. Keys are (importer, imported module).
KNOWN_BREAKS: set[tuple[str, str]] = set()
"""Imports the contract does not allow yet, each with the reason it stays (none now)."""
KNOWN_CYCLES: list[set[str]] = []
"""Import cycles not mended yet (none now)."""


# --- the contract, read from the document -------------------------------------------------------


def _table(first_header: str) -> list[list[str]]:
    """The rows of the Markdown table of `DOC` whose first header cell is `first_header`."""
    rows: list[list[str]] = []
    inside = False
    for line in DOC.read_text().splitlines():
        if not line.startswith("|"):
            if inside:
                break
            continue
        cells = [cell.strip() for cell in line.strip().strip("|").split("|")]
        if not inside:
            inside = cells[0] == first_header
        elif not set(cells[0]) <= {"-", " "}:
            rows.append(cells)
    assert rows, f"{DOC.name} has no table headed {first_header!r}"
    return rows


def _names(cell: str) -> list[str]:
    """The names of a cell: ``everything``, ``nothing`` or a comma-separated list (backquotes dropped)."""
    return [name.strip().strip("`") for name in cell.split(",") if name.strip()]


def _ours(name: str) -> str:
    return name if name == "tui" or name.startswith("tui.") else f"tui.{name}"


@dataclass(frozen=True)
class Layer:
    """One row of the Packages table."""

    names: tuple[str, ...]
    """The packages (or modules) of the row, e.g. ``("tui.commands", "tui.cli")``."""
    may_import: frozenset[str] | None
    """The rows it may use, by their first name; None: everything."""


@cache
def layers() -> dict[str, Layer]:
    """Each package name of the Packages table, with its row."""
    by_name: dict[str, Layer] = {}
    for name_cell, _, may_cell in _table("package"):
        names = tuple(_names(name_cell))
        allowed = _names(may_cell)
        may = None if allowed == ["everything"] else frozenset(_ours(a) for a in allowed if a != "nothing")
        for name in names:
            by_name[name] = Layer(names, may)
    for layer in by_name.values():
        unknown = (layer.may_import or frozenset()) - by_name.keys()
        assert not unknown, f"{WHERE}: {layer.names[0]} may import {sorted(unknown)}, which is no row"
    return by_name


@cache
def allowances() -> dict[str, tuple[str, ...]]:
    """The modules that may import more than their package, and what (modules or packages of ours)."""
    return {_names(module)[0]: tuple(_ours(n) for n in _names(also)) for module, also, _ in _table("module")}


@cache
def third_party() -> dict[str, tuple[str, ...]]:
    """Each listed third-party package, with the packages or modules of ours that may import it."""
    return {
        package: tuple(_ours(n) for n in _names(users))
        for packages, users in _table("third-party")
        for package in _names(packages)
    }


@cache
def start_up() -> list[str]:
    """The modules a short command starts from."""
    return [_names(row[0])[0] for row in _table("start-up module")]


def layer_of(module: str) -> str | None:
    """The name of the row `module` belongs to: its longest matching package (`tui` only itself)."""
    matching = [name for name in layers() if module == name or (name != "tui" and _covers(name, module))]
    return max(matching, key=len, default=None)


def _covers(prefix: str, module: str) -> bool:
    return module == prefix or module.startswith(prefix + ".")


# --- the imports, read from the code ------------------------------------------------------------


@dataclass(frozen=True)
class Import:
    """One name a module imports."""

    importer: str
    target: str
    """A module of ours (the deepest one named) or a third-party package's top-level name."""
    line: int
    lazy: bool
    """Inside a function: it runs when called, not when the module is imported."""
    typing_only: bool
    """Under ``if TYPE_CHECKING:``: never runs."""

    @property
    def where(self) -> str:
        return f"{source_of(self.importer).relative_to(ROOT)}:{self.line} ({self.importer})"


@cache
def modules() -> dict[str, Path]:
    """Every module of `tui` by its dotted name."""
    found: dict[str, Path] = {}
    for path in sorted((ROOT / "tui").rglob("*.py")):
        parts = list(path.relative_to(ROOT).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        found[".".join(parts)] = path
    return found


def source_of(module: str) -> Path:
    return modules()[module]


def _resolve(name: str) -> str:
    """The deepest module of ours that `name` names, or the top-level name of a third-party package."""
    if not _covers("tui", name):
        return name.split(".")[0]
    while name not in modules():
        name = name.rpartition(".")[0]
    return name


def _is_type_checking(test: ast.expr) -> bool:
    return isinstance(test, ast.Name | ast.Attribute) and ast.unparse(test).endswith("TYPE_CHECKING")


@cache
def imports_of(module: str) -> tuple[Import, ...]:
    """What `module` imports, at any depth of its syntax tree."""
    path = source_of(module)
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    found: list[Import] = []

    def visit(node: ast.AST, lazy: bool, typing_only: bool) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.Import):
                for alias in child.names:
                    found.append(Import(module, _resolve(alias.name), child.lineno, lazy, typing_only))
            elif isinstance(child, ast.ImportFrom):
                base = child.module or ""
                if child.level:
                    anchor = package.split(".")[: len(package.split(".")) - (child.level - 1)]
                    base = ".".join([*anchor, *([base] if base else [])])
                for alias in child.names:
                    # `from tui import piped` imports the module `tui.piped`.
                    named = f"{base}.{alias.name}"
                    target = named if named in modules() else _resolve(base)
                    found.append(Import(module, target, child.lineno, lazy, typing_only))
            elif isinstance(child, ast.If) and _is_type_checking(child.test):
                for inner in child.body:
                    visit(ast.Module(body=[inner], type_ignores=[]), lazy, True)
                for inner in child.orelse:
                    visit(ast.Module(body=[inner], type_ignores=[]), lazy, typing_only)
            else:
                inner_lazy = lazy or isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda)
                visit(child, inner_lazy, typing_only)

    visit(_parse(path), False, False)
    return tuple(found)


def _parse(path: Path) -> ast.Module:
    """`ast.parse`, tried again when Python 3.11's AST builder, whose depth counter all threads
    share, saw another thread build a tree at the same time (CPython gh-106905: a SystemError
    "AST constructor recursion depth mismatch"; a thread of an earlier test formatting a traceback
    is enough)."""
    for _ in range(4):
        try:
            return ast.parse(path.read_text(), str(path))
        except SystemError as exc:
            if "recursion depth mismatch" not in str(exc):
                raise
    return ast.parse(path.read_text(), str(path))


def all_imports() -> Iterator[Import]:
    for module in modules():
        yield from imports_of(module)


# --- the checks ---------------------------------------------------------------------------------


def test_every_module_belongs_to_a_package_of_the_table() -> None:
    orphans = [f"{source_of(m).relative_to(ROOT)} ({m})" for m in modules() if layer_of(m) is None]
    assert not orphans, f"modules in no row of the table ({WHERE}); add their package: {orphans}"


def test_every_package_imports_only_what_its_row_allows() -> None:
    broken: list[str] = []
    for imp in all_imports():
        if not _covers("tui", imp.target) or (imp.importer, imp.target) in KNOWN_BREAKS:
            continue
        mine, theirs = layer_of(imp.importer), layer_of(imp.target)
        if mine is None or theirs is None:
            continue  # the test above names the modules in no row
        layer = layers()[mine]
        if layer.may_import is None or theirs in layer.names:
            continue
        if layers()[theirs].names[0] in layer.may_import:
            continue
        if any(_covers(also, imp.target) for also in allowances().get(imp.importer, ())):
            continue
        may = ", ".join(sorted(n.removeprefix("tui.") for n in layer.may_import)) or "nothing of ours"
        broken.append(f"{imp.where} imports {imp.target}, but {mine} may import only: {may}")
    assert not broken, f"imports the table forbids ({WHERE}):\n" + "\n".join(broken)


def test_every_known_break_is_still_there() -> None:
    """An allowance for a break that was mended would let it come back unnoticed."""
    found = {(imp.importer, imp.target) for imp in all_imports()}
    assert found >= KNOWN_BREAKS, f"mended: delete from KNOWN_BREAKS: {sorted(KNOWN_BREAKS - found)}"


def test_third_party_packages_stay_where_the_table_puts_them() -> None:
    broken: list[str] = []
    for imp in all_imports():
        users = third_party().get(imp.target)
        if users is not None and not any(_covers(user, imp.importer) for user in users):
            who = ", ".join(u.removeprefix("tui.") for u in users)
            broken.append(f"{imp.where} imports {imp.target}, which only {who} may import")
    assert not broken, f"third-party imports out of place ({WHERE}):\n" + "\n".join(broken)


def test_the_table_keeps_textual_out_of_the_core() -> None:
    core = ["tui.protocol", "tui.store", "tui.codemode", "tui.access", "tui.link"]
    users = third_party()["textual"]
    allowed = [user for user in users if any(_covers(c, user) or _covers(user, c) for c in core)]
    assert not allowed, f"{WHERE} lets the core import Textual: {allowed}"


def _loaded_by(module: str) -> set[str]:
    """The modules of ours that importing `module` runs: module-level imports and their packages."""
    seen: set[str] = set()
    todo = [module]
    while todo:
        current = todo.pop()
        if current in seen:
            continue
        seen.add(current)
        parts = current.split(".")
        todo.extend(".".join(parts[:n]) for n in range(1, len(parts)))
        runs = [i for i in imports_of(current) if not (i.lazy or i.typing_only)]
        todo.extend(i.target for i in runs if _covers("tui", i.target))
    return seen


@pytest.mark.parametrize("entry", start_up())
def test_a_short_command_loads_no_heavy_package_at_start_up(entry: str) -> None:
    broken = [
        f"{imp.where} imports {imp.target} at module level"
        for module in sorted(_loaded_by(entry))
        for imp in imports_of(module)
        if imp.target in third_party() and not (imp.lazy or imp.typing_only)
    ]
    assert not broken, f"importing {entry} loads heavy packages ({WHERE}, start-up):\n" + "\n".join(broken)


def test_the_start_up_modules_load_no_heavy_package_when_run() -> None:
    """The same rule at run time, which also sees what third-party packages import in turn."""
    heavy = sorted(third_party())
    code = f"import sys, {', '.join(start_up())}; print(sorted(set({heavy!r}) & sys.modules.keys()))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]", f"importing {start_up()} loads {out.stdout.strip()}"


def test_the_app_s_first_frame_imports_no_piped_surface_and_no_turn_watch() -> None:
    """`tui attach` reaches the app through `tui.commands.sessions` (`open_access`); what only
    ``tui send`` and piped scripts use (the piped surface, the watch of turns and their outcomes,
    the Python syntax check) is imported when they run, not before the app's first frame."""
    code = (
        "import sys, tui.cli, tui.commands.attach, tui.access.local, tui.link.client, tui.ui\n"
        "from tui.commands.sessions import open_access\n"
        "print(sorted({'tui.piped', 'tui.link.watch', 'tui.link.outcomes', 'tui.link.scripts', "
        "'tui.protocol.python', 'codeop'} & sys.modules.keys()))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]", f"the attach path to the app imports {out.stdout.strip()}"


# What the first screen of an empty session does not show, so `tui attach` must not import it
# before that screen is on the terminal: httpx's command line (click, rich's progress bars and
# syntax, Pygments), the search index (SQLite), Markdown, the worker's agents and its server;
# and since the first screen is drawn before the session is reached (`StartingScreen`), nothing
# that reaching it or drawing it needs either: the wire models and pydantic, the link, httpx and
# anyio, the store, the settings' models, the session screen and its widgets (TextArea).
NOT_BEFORE_THE_FIRST_FRAME = (
    "click",
    "pygments",
    "rich.syntax",
    "rich.progress",
    "rich.markdown",
    "markdown_it",
    "sqlite3",
    "tui.store",
    "tui.commands.search",
    "tui.worker",
    "pydantic_ai",
    "openai",
    "anthropic",
    "acp",
    "uvicorn",
    "starlette",
    "pydantic",
    "pydantic_core",
    "httpx",
    "httpcore",
    "anyio",
    "h11",
    "tui.protocol",
    "tui.link",
    "tui.access",
    "tui.config",
    "tui.commands.sessions",
    "tui.ui.screens.session",
    "tui.ui.widgets",
    "textual.widgets._text_area",
)

# Put first on the path of the `tui attach` below: every import, as it starts, written to stderr
# with the thread that made it (the session is reached in a thread once the first screen shows).
_IMPORTS_BY_THREAD = """
import os, sys, threading

class _Said:
    def find_spec(self, name, path=None, target=None):
        os.write(2, f"\\nimport by {threading.current_thread().name}: {name}\\n".encode())
        return None

sys.meta_path.insert(0, _Said())
"""


def test_tui_attach_s_first_frame_imports_nothing_the_first_screen_does_not_need(
    state_dir: Path, tmp_path: Path
) -> None:
    """`tui attach ID` on a terminal (a pty) to an empty session's live worker, with every import
    and the app's output (Textual draws on stderr) in one file: every module the app's own
    thread imported before the first frame (the footer's ``Detach``) is listed before it. What
    the thread that reaches the session imports meanwhile is not drawn by the first screen."""
    import contextlib
    import os
    import pty
    import signal

    from helpers import stop_workers, wait_until

    from tui.link.launch import start_worker
    from tui.store import StatePaths, create_session

    state = StatePaths(state_dir)
    sid = create_session(state, working_directory=state_dir).id
    start_worker(state, sid)
    (tmp_path / "sitecustomize.py").write_text(_IMPORTS_BY_THREAD)
    log = state_dir / "attach.log"
    env = {**os.environ, "TERM": "xterm-256color", "PYTHONPATH": str(tmp_path)}
    pid, fd = pty.fork()
    if pid == 0:  # the child: `tui attach` with the pty as its terminal and stderr to the log
        os.dup2(os.open(log, os.O_WRONLY | os.O_CREAT | os.O_TRUNC), 2)
        os.chdir(tmp_path)
        os.execve(sys.executable, [sys.executable, "-m", "tui", "attach", sid], env)

    def drawn() -> bool:
        with contextlib.suppress(OSError):
            while select.select([fd], [], [], 0)[0] and os.read(fd, 65536):
                pass
        return log.exists() and b"Detach" in log.read_bytes()

    try:
        wait_until(drawn, "the first frame")
    finally:
        os.kill(pid, signal.SIGKILL)
        os.waitpid(pid, 0)
        os.close(fd)
        stop_workers(state_dir, sid)
    text = log.read_bytes().split(b"Detach")[0].decode(errors="replace")
    main = "import by MainThread: "
    imported = {line.removeprefix(main).strip() for line in text.splitlines() if line.startswith(main)}
    assert "textual.app" in imported, text[-2000:]
    early = sorted(
        m for m in imported if any(m == n or m.startswith(n + ".") for n in NOT_BEFORE_THE_FIRST_FRAME)
    )
    assert not early, f"`tui attach` imported before its first frame: {early}"


def test_httpx_without_its_command_line_still_runs_it_when_called() -> None:
    """The stand-in for httpx's command line keeps click and Pygments out of a tui process, and
    ``httpx.main`` still runs the real one."""
    code = (
        "import sys, tui.cli; tui.cli.defer_httpx_command_line(); import httpx\n"
        "print(sorted({'click', 'pygments', 'rich.progress'} & sys.modules.keys()), flush=True)\n"
        "httpx.main(['--help'])"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=False)
    assert out.stdout.startswith("[]\n"), out.stdout + out.stderr
    assert "Usage: httpx" in out.stdout and out.returncode == 0, out.stdout + out.stderr


def test_importing_the_wire_models_builds_no_validator() -> None:
    """A wire model builds its validator on first use (`defer_build`): importing `tui.protocol`
    builds none, so neither pydantic's plugin look-up (every installed package's entry points)
    nor any schema is paid by a process that only imports it."""
    code = (
        "import importlib, pkgutil, sys, tui.protocol\n"
        "from pydantic import BaseModel\n"
        "mods = [importlib.import_module('tui.protocol.' + m.name) "
        "for m in pkgutil.iter_modules(tui.protocol.__path__)]\n"
        "print(sorted(f'{m.__name__}.{n}' for m in mods for n, c in vars(m).items() "
        "if isinstance(c, type) and issubclass(c, BaseModel) and c.__module__ == m.__name__ "
        "and c.__pydantic_complete__), 'pydantic.plugin._loader' in sys.modules)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[] False", f"importing tui.protocol built validators: {out.stdout}"


def _cycles(edges: dict[str, set[str]]) -> list[set[str]]:
    """The strongly connected components of more than one module (Tarjan's algorithm)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found: list[set[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        for nxt in sorted(edges.get(node, ())):
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            component = set()
            while True:
                member = stack.pop()
                component.add(member)
                if member == node:
                    break
            if len(component) > 1:
                found.append(component)

    for node in sorted(edges):
        if node not in index:
            visit(node)
    return found


def test_no_two_modules_import_each_other() -> None:
    """Not even through an import inside a function, which only hides the cycle until it runs."""
    edges: dict[str, set[str]] = {}
    first: dict[tuple[str, str], Import] = {}
    for imp in all_imports():
        if _covers("tui", imp.target) and not imp.typing_only and imp.target != imp.importer:
            edges.setdefault(imp.importer, set()).add(imp.target)
            first.setdefault((imp.importer, imp.target), imp)
    cycles = _cycles(edges)
    gone = [sorted(known) for known in KNOWN_CYCLES if known not in cycles]
    assert not gone, f"these cycles are gone: delete them from KNOWN_CYCLES: {gone}"
    broken = []
    for cycle in cycles:
        if cycle in KNOWN_CYCLES:
            continue
        links = [imp for (a, b), imp in sorted(first.items()) if a in cycle and b in cycle]
        broken.append("; ".join(f"{imp.where} imports {imp.target}" for imp in links))
    assert not broken, "import cycles (docs/architecture.md, Packages):\n" + "\n".join(broken)


def test_the_tables_name_real_modules() -> None:
    """A row or an allowance that names no module is a typo, and would allow nothing."""
    named = [*layers(), *allowances(), *start_up()]
    named += [also for alsos in allowances().values() for also in alsos]
    named += [user for users in third_party().values() for user in users]
    missing = [name for name in named if not any(_covers(name, m) for m in modules())]
    assert not missing, f"{WHERE} names no module of tui: {missing}"


def test_help_lists_every_command() -> None:
    out = subprocess.run([sys.executable, "-m", "tui", "--help"], capture_output=True, text=True, check=True)
    for word in ("attach", "sessions", "send", "answer", "web", "share"):
        assert word in out.stdout


def test_unknown_option_is_a_usage_error() -> None:
    out = subprocess.run([sys.executable, "-m", "tui", "sessions", "--bogus"], capture_output=True, text=True)
    assert out.returncode == 2
    assert "unrecognized arguments: --bogus" in out.stderr
