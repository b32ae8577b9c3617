"""Typed configs: dataclasses whose fields (:func:`option`) carry their help text;
:func:`add_options` makes one flag per field and :func:`from_args` fills the dataclass.
"""

from __future__ import annotations

import argparse
import dataclasses
import re
import types
import typing
from typing import Any, TypeVar

T = TypeVar("T")


def plain(text: str | None) -> str | None:
    """Help text without reST markup: ``x`` and :role:`x` become x, `x` becomes 'x'."""
    if not text:
        return text
    text = re.sub(r":\w+:`~?([^`]+)`", r"\1", text).replace("\\ ", "")
    return re.sub(r"`([^`]+)`", r"'\1'", re.sub(r"``([^`]+)``", r"\1", text))


def option(help: str, default: Any = dataclasses.MISSING, *, flags: tuple[str, ...] = (),
           minimum: float | None = None, above: float | None = None,
           maximum: float | None = None, **argparse_kw: Any) -> Any:
    """A dataclass field with its flag's help text and argparse keywords; ``flags`` replaces
    ``--field-name``; ``minimum`` / ``maximum`` / ``above`` bound a number, checked when parsed."""
    meta = {"help": help, "flags": flags, "argparse": argparse_kw, "minimum": minimum,
            "above": above, "maximum": maximum}
    return dataclasses.field(default=default, metadata=meta)


def group(title: str, cls: type) -> Any:
    """A field holding config ``cls`` (default ``cls()``), its flags under ``title``."""
    return dataclasses.field(default_factory=cls, metadata={"group": title})


def _bounded(typ: type, minimum: float | None, above: float | None = None,
             maximum: float | None = None) -> Any:
    """An argparse ``type`` that accepts numbers of ``typ`` ``>= minimum``, ``> above`` and
    ``<= maximum`` (otherwise a usage error, exit 2, naming the value and the bound)."""
    def parse(text: str) -> Any:
        try:
            value = typ(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"invalid {typ.__name__} value: {text!r}") from None
        if minimum is not None and value < minimum:
            raise argparse.ArgumentTypeError(f"must be at least {minimum}, got {value}")
        if above is not None and not value > above:
            raise argparse.ArgumentTypeError(f"must be more than {above}, got {value}")
        if maximum is not None and value > maximum:
            raise argparse.ArgumentTypeError(f"must be at most {maximum}, got {value}")
        return value
    parse.__name__ = typ.__name__
    return parse


def _flag_type(hint: Any) -> Any:
    """``X`` of ``X`` or ``X | None``."""
    if isinstance(hint, types.UnionType) or typing.get_origin(hint) is typing.Union:
        args = [a for a in typing.get_args(hint) if a is not type(None)]
        if len(args) == 1:
            return args[0]
        raise TypeError(f"cannot make a flag of {hint!r}")
    return hint


def add_options(parser: argparse.ArgumentParser | Any, cls: type, *,
                seen: set[str] | None = None, title: str | None = None) -> None:
    """Add the flags of config dataclass ``cls`` to ``parser`` (those not in ``seen``, which
    is updated; under an argument group ``title`` when given and when any flag is new)."""
    seen = set() if seen is None else seen
    hints = typing.get_type_hints(cls)
    new = [f for f in dataclasses.fields(cls) if f.name not in seen and "help" in f.metadata]
    target = parser.add_argument_group(title) if title and new else parser
    for f in new:
        seen.add(f.name)
        meta = f.metadata
        kw: dict[str, Any] = {"help": plain(meta["help"]), "dest": f.name, **meta["argparse"]}
        typ = _flag_type(hints[f.name])
        if typing.get_origin(typ) is tuple:  # a repeatable flag: each use adds one value
            kw.update(action="append", type=typing.get_args(typ)[0])
        elif typ is bool:
            kw["action"] = "store_true"
        elif typ in (int, float) and any(meta.get(k) is not None
                                         for k in ("minimum", "above", "maximum")):
            kw["type"] = _bounded(typ, meta.get("minimum"), meta.get("above"),
                                  meta.get("maximum"))
        else:
            kw["type"] = typ
        if meta["flags"] and typ is not bool and kw.get("action") != "append":  # named by its flag, not by the field
            kw.setdefault("metavar", meta["flags"][0].lstrip("-").replace("-", "_").upper())
        if f.default is dataclasses.MISSING:
            kw["required"] = True
        elif typ is not bool:
            kw["default"] = None if kw.get("action") == "append" else f.default
        target.add_argument(*(meta["flags"] or (f"--{f.name.replace('_', '-')}",)), **kw)
    for f in dataclasses.fields(cls):
        if "group" in f.metadata:
            add_options(parser, hints[f.name], seen=seen, title=f.metadata["group"])


def from_args(cls: type[T], args: argparse.Namespace) -> T:
    """An instance of config dataclass ``cls`` from parsed flags (fields without a flag, or
    whose flag the parser lacks, keep their defaults; a :func:`group` field from its flags)."""
    hints = typing.get_type_hints(cls)
    kw: dict[str, Any] = {}
    for f in dataclasses.fields(cls):  # type: ignore[arg-type]
        if "group" in f.metadata:
            kw[f.name] = from_args(hints[f.name], args)
        elif "help" in f.metadata and hasattr(args, f.name):
            value = getattr(args, f.name)
            if typing.get_origin(hints[f.name]) is tuple:  # a repeatable flag
                value = f.default if value is None else tuple(value)
            kw[f.name] = value
    return cls(**kw)
