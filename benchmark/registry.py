"""The one registry: model and task names -> lazily imported ``"module:Class"``.

A name registered twice is an error, an unknown one gets close-name suggestions. Models come
from :mod:`benchmark.zoo`; ``family:ARG`` loads a family's adapter on any checkpoint, any other
``module:Class`` is a user's adapter.
"""

from __future__ import annotations

import difflib
import importlib
import importlib.util
import inspect
import logging
from dataclasses import replace
from typing import Any

from benchmark import zoo

log = logging.getLogger(__name__)


class RegistryError(LookupError):
    """Unknown or duplicate name, or a target that cannot be imported."""


MODELS: dict[str, zoo.Model] = {}  # name -> its record (zoo.Model: target, pin, options)
FAMILIES: dict[str, tuple[str, str]] = {}  # prefix -> (target, extra)
TASKS: dict[str, str] = {}


def register_model(name: str, target: str, *, description: str = "", extra: str = "",
                   **kwargs: Any) -> None:
    """A user's model; ``kwargs``: its adapter's arguments (``checkpoint``/``revision`` pin it)."""
    try:
        _add(zoo.Model(name, kwargs.pop("checkpoint", ""), kwargs.pop("revision", None),
                       description, options=kwargs, target=target, extra=extra))
    except zoo.ZooError as e:
        raise RegistryError(str(e)) from e


def _add(m: zoo.Model) -> None:
    if m.name in MODELS:
        raise RegistryError(f"model {m.name!r} registered twice ({MODELS[m.name].target}, "
                            f"{m.target})")
    MODELS[m.name] = m


def register_family(prefix: str, target: str, extra: str = "") -> None:
    if prefix in FAMILIES:
        raise RegistryError(f"model family {prefix!r} registered twice")
    FAMILIES[prefix] = (target, extra)


def register_task(name: str, target: str) -> None:
    if name in TASKS:
        raise RegistryError(f"task {name!r} registered twice ({TASKS[name]}, {target})")
    TASKS[name] = target


def import_target(target: str, extra: str = "") -> Any:
    """Import ``module.path:Attr``; a missing library names the extra to install."""
    module_name, _, attr = target.partition(":")
    if not attr:
        raise RegistryError(f"{target!r} is not of the form module.path:Class")
    try:
        module = importlib.import_module(module_name)
    except ModuleNotFoundError as e:
        missing = e.name or "?"
        if extra and missing != module_name:
            raise RegistryError(
                f"{target}: needs the Python package {missing!r}; install it with "
                f"pip install -e '.[{extra}]'"
            ) from e
        raise RegistryError(f"cannot import {module_name!r} ({e})") from e
    try:
        return getattr(module, attr)
    except AttributeError as e:
        raise RegistryError(f"{module_name!r} has no attribute {attr!r}") from e


def suggest(name: str, known: list[str]) -> str:
    close = difflib.get_close_matches(name, known, n=3, cutoff=0.5)
    return f"; did you mean {', '.join(close)}?" if close else ""


def _is_module(name: str) -> bool:
    """True when ``name`` is an importable module (its parents are imported to find out)."""
    try:
        return importlib.util.find_spec(name) is not None
    except (ImportError, ValueError):
        return False


def accepted(cls: Any, overrides: dict[str, Any]) -> dict[str, Any]:
    """The ``overrides`` that ``cls(...)`` accepts (a named parameter, or ``**kwargs``)."""
    try:
        params = inspect.signature(cls).parameters.values()
    except (TypeError, ValueError):
        return {}
    if any(p.kind is p.VAR_KEYWORD for p in params):
        return dict(overrides)
    names = {p.name for p in params if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)}
    return {k: v for k, v in overrides.items() if k in names}


def load_user_adapter(target: str, **overrides: Any) -> Any:
    """A user's ``module:Class``: an Adapter as it is, any other class in a
    :class:`~benchmark.models.base.UserAdapter`; ``device``/``dtype`` passed where accepted."""
    from benchmark.models.base import Adapter, UserAdapter

    cls = import_target(target)
    if not callable(cls):
        raise RegistryError(f"{target} is a {type(cls).__name__}, not an adapter class")
    kw = accepted(cls, overrides)
    ignored = sorted(set(overrides) - set(kw))
    if ignored:
        log.warning("%s does not accept %s; ignored", target, ", ".join(ignored))
    try:  # the user's code: its failure is one line naming it, never "a bug in 3XCM"
        obj = cls(**kw)
        return obj if isinstance(obj, Adapter) else UserAdapter(obj, target, **kw)
    except Exception as e:  # noqa: BLE001
        log.debug("%s failed", target, exc_info=True)
        raise RegistryError(f"{target} is not a usable adapter: {type(e).__name__}: {e} "
                            "(one needs encode_texts and encode_images: docs/models.md)") from e


def load_model(name: str, conventions: str = "reference", **overrides: Any) -> Any:
    """The adapter for a registered name, a ``family:arg`` or a ``module:Class``, under the
    ``conventions`` profile; caller overrides win, recorded as deviations."""
    from benchmark.models import conventions as conv

    try:
        rec = conv.resolve(name, conventions)
    except conv.ConventionsError as e:
        raise RegistryError(str(e)) from e
    if name in MODELS:
        entry = MODELS[name]
        if rec is not None:
            return _load_profiled(entry, rec, overrides)
        cls = import_target(entry.target, entry.extra)
        return _checked(entry, cls(name=name, **{**entry.kwargs, **overrides}))
    prefix, sep, arg = name.partition(":")
    if sep and prefix in FAMILIES:
        target, extra = FAMILIES[prefix]
        cls = import_target(target, extra)
        return cls(name=name, checkpoint=arg, **overrides)
    if sep and arg.isidentifier() and _is_module(prefix):
        return load_user_adapter(name, **overrides)
    raise RegistryError(
        f"unknown model {name!r}{suggest(name, sorted(MODELS))} "
        f"(see `python -m benchmark ls`; families: {', '.join(sorted(FAMILIES))}; "
        f"or pass module:Class of your own adapter)"
    )


def _checked(record: zoo.Model, adapter: Any) -> Any:
    """``adapter`` when it scores as its record says (cosine or MaxSim), else a RegistryError."""
    sim = getattr(getattr(adapter, "spec", None), "similarity", record.similarity)
    if sim != record.similarity:
        raise RegistryError(f"model {record.name}: its adapter scores by {sim}, its record "
                            f"says {record.similarity}")
    return adapter


def _load_profiled(entry: zoo.Model, rec: Any, overrides: dict[str, Any]) -> Any:
    """An adapter built as a conventions record says, with ``adapter.profile`` set."""
    base = MODELS[rec.loads] if rec.loads else entry  # the record whose identity it loads
    kwargs = dict(base.kwargs)
    kwargs.update(rec.options)
    if rec.dtype is not None:
        kwargs["dtype"] = rec.dtype
    deviations = tuple(
        f"{k}={v!r} given by the caller (the {rec.profile} profile says {kwargs[k]!r})"
        for k, v in overrides.items() if k in kwargs and v is not None and kwargs[k] != v
    )
    for d in deviations:
        log.warning("model %s: %s", entry.name, d)
    kwargs.update({k: v for k, v in overrides.items() if v is not None or k not in kwargs})
    adapter = import_target(base.target, base.extra)(name=entry.name, **kwargs)
    adapter.profile = replace(rec, dtype=adapter.dtype, deviations=deviations)
    return _checked(base, adapter)


def load_task(name: str) -> Any:
    if name not in TASKS:
        raise RegistryError(f"unknown task {name!r}{suggest(name, sorted(TASKS))}")
    return import_target(TASKS[name])


def register_zoo(tasks: dict[str, str], families: list[zoo.Family]) -> None:
    """Register the tables of :mod:`benchmark.zoo` (a name twice is a :class:`RegistryError`)."""
    for name, target in tasks.items():
        register_task(name, target)
    for fam in families:
        if fam.prefix:
            register_family(fam.prefix, fam.target, extra=fam.extra)
        for m in fam.models:
            _add(replace(m, target=fam.target, extra=fam.extra))


def models() -> dict[str, zoo.Model]:
    return dict(MODELS)


def tasks() -> dict[str, str]:
    return dict(TASKS)


register_zoo(zoo.TASKS, zoo.FAMILIES)
