"""Adapter kinds by name. Built-ins register exactly the way a third party does: through the
``external_query_service.adapters`` entry-point group, or ``register_adapter`` at run time.
"""

from __future__ import annotations

import threading
from importlib.metadata import EntryPoint, entry_points
from typing import TYPE_CHECKING

from ..errors import SettingsError, UnknownAdapterKind

if TYPE_CHECKING:
    from ..adapters._base import Adapter
    from ..adapters.options import AdapterOptions
    from ..settings import AdapterSettings

__all__ = [
    "ENTRY_POINT_GROUP",
    "adapter_class",
    "adapter_options",
    "known_kinds",
    "register_adapter",
]

ENTRY_POINT_GROUP = "external_query_service.adapters"

_registered: dict[str, type[Adapter]] = {}
_broken: dict[str, str] = {}  # plugin name -> why it failed to load
_lock = threading.Lock()
_loaded_entry_points = False


def register_adapter(kind: str, cls: type[Adapter], *, replace: bool = False) -> None:
    """Make ``kind`` usable in ``[[adapters]] kind = ...``."""
    with _lock:
        if kind in _registered and _registered[kind] is not cls and not replace:
            raise SettingsError(f"adapter kind {kind!r} is already registered")
        _registered[kind] = cls


def _load_entry_points() -> None:
    global _loaded_entry_points
    if _loaded_entry_points:
        return
    for point in entry_points(group=ENTRY_POINT_GROUP):
        if point.name not in _registered:  # an explicit registration wins over the installed one
            _register_entry_point(point)
    _loaded_entry_points = True


def _load_entry_point(kind: str) -> None:
    """Load the entry point named ``kind`` alone (the first that loads), so a service
    imports only the adapters it is configured with."""
    if _loaded_entry_points or kind in _registered or kind in _broken:
        return
    for point in entry_points(group=ENTRY_POINT_GROUP, name=kind):
        if _register_entry_point(point):
            return


def _register_entry_point(point: EntryPoint) -> bool:
    """Load one entry point and register its class; a plugin that fails to load is kept in
    ``_broken`` with its error (it must not take the others down). True when it loaded."""
    try:
        cls = point.load()
    except Exception as exc:
        _broken[point.name] = f"{type(exc).__name__}: {exc}"
        return False
    with _lock:
        _registered.setdefault(point.name, cls)
    return True


def _ensure_builtins() -> None:
    # Entry points exist only once the distribution is installed; a source checkout on
    # sys.path still gets the built-ins, registered the same way.
    from ..adapters import builtin_adapters

    for kind, cls in builtin_adapters().items():
        with _lock:
            _registered.setdefault(kind, cls)


def known_kinds() -> list[str]:
    """Every registered adapter kind, sorted."""
    _load_entry_points()
    _ensure_builtins()
    return sorted(_registered)


def adapter_class(kind: str) -> type[Adapter]:
    """The adapter class registered for ``kind``; ``UnknownAdapterKind`` when none is, a
    ``SettingsError`` when its plugin failed to load."""
    _load_entry_point(kind)
    if kind not in _registered:
        _load_entry_points()  # an unknown kind's message names every kind there is
        _ensure_builtins()
    if kind in _broken and kind not in _registered:
        raise SettingsError(f"adapter plugin {kind!r} failed to load: {_broken[kind]}")
    try:
        return _registered[kind]
    except KeyError:
        raise UnknownAdapterKind(kind, list(_registered)) from None


def adapter_options(config: AdapterSettings) -> AdapterOptions:
    """``config``'s own keys validated by its kind's ``Options``, without building the
    adapter (``UnknownAdapterKind``, or ``SettingsError`` when a key does not fit)."""
    return config.options_as(adapter_class(config.kind).Options)
