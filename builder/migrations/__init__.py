"""Catalog schema migrations, applied in ascending ``VERSION`` order.

Each module ``mNNNN_<name>.py`` defines ``VERSION: int`` and ``SQL: str`` (a script run inside
one transaction). Never edit a migration that has landed; add a new one. Ranges keep parallel
work apart: 1-99 base, 100-199 concepts/queries/LLM, 200-299 crawl/dedup, 300-399 annotation,
400-499 tagging/triplets.
"""

from __future__ import annotations

import importlib
import pkgutil
from dataclasses import dataclass


@dataclass(frozen=True)
class Migration:
    version: int
    name: str
    sql: str


def all_migrations() -> list[Migration]:
    """Every migration module in this package, sorted by version; duplicates are an error."""
    found: dict[int, Migration] = {}
    for info in pkgutil.iter_modules(__path__):
        if not info.name.startswith("m"):
            continue
        mod = importlib.import_module(f"{__name__}.{info.name}")
        mig = Migration(int(mod.VERSION), info.name, str(mod.SQL))
        if mig.version in found:
            raise RuntimeError(
                f"duplicate catalog migration version {mig.version}: "
                f"{found[mig.version].name} and {mig.name}"
            )
        found[mig.version] = mig
    return [found[v] for v in sorted(found)]
