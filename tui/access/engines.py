"""Which `WorkerEngine` runs this machine's sessions' workers: ``config.toml``'s ``[cluster]``.

``engine = "local"`` (the default): `LocalEngine`, each worker a process of this machine.
``engine = "ray"``: a Ray cluster's (``tui web --ray ADDRESS`` says the same for its process,
`run_on_ray`). Ray is an optional dependency (``pip install
'tui[cluster]'``); where it is not installed, tui imports nothing of it and says in one line what
to install. The Ray engine is `tui.link.ray.RayEngine` (docs/scale.md).
"""

from __future__ import annotations

import importlib.util

from tui.config import Config, load_config
from tui.errors import TuiError
from tui.link.engine import LocalEngine, WorkerEngine
from tui.store import StatePaths

__all__ = ["CLUSTER_EXTRA", "engine_for", "run_on_ray"]

CLUSTER_EXTRA = "pip install 'tui[cluster]'"
"""What installs the cluster engines' dependencies (Ray)."""

_ray_address: str | None = None
"""The Ray cluster this process's sessions run on whatever config.toml says (`run_on_ray`)."""


def run_on_ray(address: str) -> None:
    """Run this process's sessions' workers on the Ray cluster at `address` (``HOST:PORT``), as
    ``[cluster] engine = "ray"`` and that address in config.toml would: ``tui web --ray``. The
    ``[cluster]`` table's other settings (``resources``) still apply."""
    global _ray_address
    _ray_address = address


def engine_for(state: StatePaths, config: Config | None = None) -> WorkerEngine:
    """The engine `config` (``config.toml`` when None) names, on the state dir `state`.

    Raises:
        TuiError: the file cannot be read, or names an engine this installation cannot run
            (one line: what is missing and what to type).
    """
    if config is None:
        config = load_config()
        if _ray_address is not None:
            cluster = config.cluster.model_copy(update={"engine": "ray", "address": _ray_address})
            config = config.model_copy(update={"cluster": cluster})
    chosen = config.cluster.engine
    if chosen == "local":
        return LocalEngine(state)
    where = f" in {config.path}" if config.path is not None else ""
    # Looked up, not imported: tui imports nothing of Ray until an engine runs on it.
    if importlib.util.find_spec("ray") is None:
        raise TuiError(
            f'[cluster] engine = "ray"{where} needs Ray, which is not installed: `{CLUSTER_EXTRA}` '
            f'installs it (or set engine = "local")'
        )
    if config.cluster.address is None:
        raise TuiError(
            f'[cluster] engine = "ray"{where} needs the cluster\'s address: add address = "HOST:PORT" '
            f"(what `ray start --head` printed)"
        )
    from tui.link.ray import RayEngine

    return RayEngine(state, config.cluster.address, config.cluster.resources)
