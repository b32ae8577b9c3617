"""The curated concept list (``data/concepts.txt`` or ``--curated FILE``: a name a line, ``#``
comments) and concept-name normalisation."""

from __future__ import annotations

import re
from pathlib import Path

from builder.stagekit import StageInputError
from core import datatables


def normalize_concept(name: str) -> str:
    """Lower case, single spaces, no surrounding punctuation."""
    name = re.sub(r"\s+", " ", name.strip().lower())
    return name.strip(" .,;:!?\"'`")


def load_curated(path: str | Path | None = None) -> list[str]:
    """The curated concept list (default ``data/concepts.txt``), normalised, order kept."""
    if path is None:
        names = datatables.concepts()
    else:
        p = Path(path)
        if not p.is_file():
            raise StageInputError(f"curated concept file not found: {p}")
        lines = p.read_text(encoding="utf-8").splitlines()
        names = [ln.strip() for ln in lines if ln.strip() and not ln.lstrip().startswith("#")]
    return list(dict.fromkeys(n for n in map(normalize_concept, names) if n))  # order kept
