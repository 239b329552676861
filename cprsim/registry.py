"""The strategy registry: names to strategy classes, built-ins and plugins (entry points).

It belongs to the model layer (no import of the simulation layer): the scenario validates its
``[strategy]`` table here; the strategies (``cprsim/sim/``) register themselves with
:func:`register`, and :func:`ensure_loaded` imports the modules that hold them, the built-ins
(:data:`BUILTIN_MODULES`, by name) and then every entry point of the group
``cprsim.strategies``, once per process. A strategy is a class with a ``name``, a pydantic
``Params`` model and the hooks of :class:`cprsim.sim.strategies.Strategy`.
"""

from __future__ import annotations

import math
import re
import threading
from typing import Any

from pydantic import BaseModel, ValidationError

from cprsim.errors import InputError, validation_line


def is_strategy(obj: Any) -> bool:
    """A strategy class: a subclass of :class:`cprsim.sim.strategies.Strategy` (told by its interface:
    a ``name``, a ``Params`` model and the hooks, so that this module imports no simulation code)."""
    return (
        isinstance(obj, type)
        and isinstance(getattr(obj, "name", None), str)
        and isinstance(params := getattr(obj, "Params", None), type)
        and issubclass(params, BaseModel)
        and all(
            callable(getattr(obj, h, None)) for h in ("save_s", "on_failure", "load_s", "on_commit")
        )
    )


REGISTRY: dict[str, Any] = {}  #: name -> strategy class
#: the entry-point group a distribution declares its strategies in (``module`` or ``module:Class``)
ENTRY_POINT_GROUP = "cprsim.strategies"
#: the modules of the built-in strategies (loaded before any plugin)
BUILTIN_MODULES = ("cprsim.sim.strategies", "cprsim.sim.prioritized", "cprsim.sim.beyond")
#: a strategy name: it is a TOML value, a CSV cell and an item of ``--strategies a,b``
_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.+-]{0,63}")


class DuplicateStrategy(ValueError):
    """A strategy registered under a name another class has already."""


def register(cls: Any) -> Any:
    """Class decorator: make ``cls`` known by ``cls.name`` (to scenarios, the CLI, the planner, sweeps).

    A name another class holds is refused (:class:`DuplicateStrategy`); registering the same class
    again, or a class of the same module and qualified name (a module reloaded, a notebook cell run
    again), replaces it."""
    if not is_strategy(cls):
        raise TypeError(
            f"@register takes a subclass of cprsim.sim.strategies.Strategy, got {cls!r}"
        )
    name = cls.name
    if not isinstance(name, str) or not _NAME.fullmatch(name) or name == "all":
        raise ValueError(
            f"{cls.__module__}.{cls.__qualname__}: strategy name {name!r} is not a name: give "
            "letters, digits, '_', '-', '.' or '+' (at most 64, not 'all')"
        )
    old = REGISTRY.get(name)
    if (
        old is not None
        and old is not cls
        and (old.__module__, old.__qualname__) != (cls.__module__, cls.__qualname__)
    ):
        raise DuplicateStrategy(
            f"strategy {name!r} is registered already (by {old.__module__}.{old.__qualname__})"
        )
    # its parts: required members enforced here, never defaulted (Strategy.missing_parts)
    missing = cls.missing_parts() if callable(getattr(cls, "missing_parts", None)) else []
    if missing:
        raise InputError(f"strategy {name!r}: {'; '.join(missing)}")
    REGISTRY[name] = cls
    return cls


def get(name: str) -> Any:
    """The strategy registered as ``name``. A built-in (or one registered in this process) is found
    without loading the plugins; any other name loads them first (:func:`ensure_loaded`). Once a
    plugin failed to load, every lookup raises its error."""
    _load_builtins()
    if _load_error is not None:
        raise _load_error.with_traceback(None)
    cls = REGISTRY.get(name)
    if cls is None:
        ensure_loaded()
        cls = REGISTRY.get(name)
    if cls is None:
        raise ValueError(f"unknown strategy {name!r} (known: {', '.join(sorted(REGISTRY))})")
    return cls


def validate_params(name: str, params: dict[str, Any]) -> BaseModel:
    """Strategy ``name``'s parameters validated by its ``Params``; an unknown name or a bad
    parameter raises ValueError (one line)."""
    cls = get(name)
    try:
        return cls.Params.model_validate(params)
    except ValidationError as e:
        raise ValueError(f"{validation_line(e)} (strategy {name!r})") from None


def extra_memory(cls: Any, scenario: Any, params: dict[str, Any]) -> float:
    """The memory strategy ``cls`` with parameters ``params`` (a ``[strategy]`` table without its
    name) adds to the embedding tables, as a fraction of them: its planning part's
    ``extra_memory(scenario, params)`` (ECRM's parity: ``m/k``; 0: its checkpoints live in
    storage). The planner reports it per option and leaves out the variants above its
    ``max_extra_memory``. A part that gives no finite number >= 0 raises ValueError naming the
    strategy."""
    x = cls.planning.extra_memory(scenario, dict(params))
    if isinstance(x, bool) or not isinstance(x, (int, float)) or not math.isfinite(x) or x < 0:
        raise ValueError(
            f"strategy {getattr(cls, 'name', cls)!r}: planning.extra_memory gave {x!r}, not a "
            "finite fraction >= 0 of the embedding tables"
        )
    return float(x)


def names() -> list[str]:
    """Every strategy's name, plugins included (loads them: see :func:`ensure_loaded`)."""
    ensure_loaded()
    return sorted(REGISTRY)


def builtin_names() -> list[str]:
    """The built-in strategies' names (imports no plugin)."""
    _load_builtins()
    return sorted(n for n, c in REGISTRY.items() if c.__module__ in BUILTIN_MODULES)


_builtins_loaded = False


def _load_builtins() -> None:
    global _builtins_loaded
    if _builtins_loaded:
        return
    import importlib

    for mod in BUILTIN_MODULES:
        try:
            importlib.import_module(mod)
        except ModuleNotFoundError as e:  # a module not written yet
            if e.name != mod:
                raise
    _builtins_loaded = True


def _one_line(text: object, limit: int = 300) -> str:
    text = " ".join(str(text).split())
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _describe(ep: Any) -> str:
    """``plugin DIST VERSION, entry point "NAME = VALUE" (group ...)``: where a plugin comes from."""
    dist = getattr(ep, "dist", None)
    where = f"{dist.name} {dist.version}" if dist is not None else "(distribution unknown)"
    return f'plugin {where}, entry point "{ep.name} = {ep.value}" (group {ENTRY_POINT_GROUP})'


def _load_entry_point(ep: Any) -> None:
    """Import one entry point; its import registers its strategies (a class it names is registered
    here if it did not register itself). Any failure: a one-line :class:`InputError` naming it."""
    import inspect

    from cprsim.errors import InputError

    before = dict(REGISTRY)
    try:
        obj = ep.load()
        if is_strategy(obj):
            if REGISTRY.get(obj.name) is not obj:
                register(obj)
        elif inspect.ismodule(
            obj
        ):  # it registered its strategies now, or when it was imported before
            mod = obj.__name__
            if REGISTRY.keys() == before.keys() and not any(
                c.__module__ == mod or c.__module__.startswith(mod + ".") for c in REGISTRY.values()
            ):
                raise InputError(
                    f"{_describe(ep)}: its module {mod} registers no strategy (decorate a "
                    "subclass of cprsim.sim.strategies.Strategy with @register)"
                )
        else:
            raise InputError(
                f"{_describe(ep)} names a {type(obj).__name__}, neither a module nor a "
                "subclass of cprsim.sim.strategies.Strategy"
            )
    except InputError:
        REGISTRY.clear()
        REGISTRY.update(before)
        raise
    except DuplicateStrategy as e:
        REGISTRY.clear()
        REGISTRY.update(before)
        raise InputError(
            f"{_describe(ep)}: {_one_line(e)}; uninstall one of the two, or rename "
            "the plugin's strategy"
        ) from None
    except Exception as e:
        REGISTRY.clear()
        REGISTRY.update(before)
        raise InputError(
            f"{_describe(ep)} failed to load: {type(e).__name__}: {_one_line(e)}"
        ) from None


def _load_plugins() -> None:
    """The built-in strategies, then every entry point of :data:`ENTRY_POINT_GROUP`, by name."""
    from importlib.metadata import entry_points

    _load_builtins()
    for ep in sorted(entry_points(group=ENTRY_POINT_GROUP), key=lambda ep: (ep.name, ep.value)):
        _load_entry_point(ep)


_load_plugins_done = False
_load_error: Exception | None = None  #: a plugin that failed: every later call raises it again
_loading = threading.local()  # a plugin that asks the registry while it is being imported
_lock = threading.RLock()


def ensure_loaded() -> None:
    """Load the built-in strategies and the installed plugins, once per process (lazily: nothing
    is imported before a strategy is looked up). A plugin that fails to import, or registers a
    name that is taken, raises a one-line :class:`cprsim.errors.InputError` naming its entry point
    and distribution, now and at every later call."""
    global _load_plugins_done, _load_error
    if _load_plugins_done:
        if _load_error is not None:
            raise _load_error.with_traceback(None)
        return
    with _lock:
        if _load_plugins_done or getattr(_loading, "active", False):
            if _load_error is not None:
                raise _load_error.with_traceback(None)
            return
        _loading.active = True
        try:
            _load_plugins()
        except Exception as e:
            _load_error = e
            raise
        finally:
            _loading.active = False
            _load_plugins_done = True
