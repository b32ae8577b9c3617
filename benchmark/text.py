"""One identity per text: the normalisation of names and terms, and the strict CSV reader.

``benchmark`` is the lowest layer, so the builder, the annotation tools and the triplet tools
import these too; no other module normalises a name or reads a CSV its own way.

- :func:`normalize_term`: Unicode NFC, outer whitespace stripped, inner runs of whitespace
  one space. macOS writes file names in NFD ("cafe" + U+0301); the same word typed on a
  keyboard is NFC ("caf" + U+00E9). Every name and term is normalised where it enters
  (folder names, CSV cells, the catalog, the release, the query table, annotation exports),
  so the two spellings are one concept, one term.
- :func:`majority_terms`: the one rule that picks a term among several proposals (reviews,
  published tables): the most frequent normalised spelling, ties broken by first seen.
- :class:`StrictDictReader`: ``csv.DictReader`` that refuses a row with more or fewer fields
  than the header (``DictReader`` puts extra fields under the key ``None`` and fills missing
  ones with ``None``: a row ``food,DEU,Es,sen`` scored the text "Es"), naming the file and
  line.
"""

from __future__ import annotations

import csv
import unicodedata
from collections import Counter
from collections.abc import Iterable, Iterator
from typing import Any


def normalize_term(text: Any) -> str:
    """NFC of ``text`` (``None`` is ``""``), stripped, inner whitespace runs one space."""
    return " ".join(unicodedata.normalize("NFC", str(text if text is not None else "")).split())


def majority_terms(terms: Iterable[Any]) -> str | None:
    """The most frequent normalised non-empty term (first seen wins a tie), or None."""
    counts: Counter[str] = Counter()
    for t in terms:
        n = normalize_term(t)
        if n:
            counts[n] += 1
    return max(counts, key=lambda k: counts[k], default=None) if counts else None


class CSVShapeError(ValueError):
    """A CSV row whose field count is not the header's: one line naming file and line."""


class StrictDictReader:
    """Rows of a CSV as dicts, like ``csv.DictReader`` (blank lines skipped), but a row with
    more or fewer fields than the header raises ``error`` (default :class:`CSVShapeError`)
    ``"<what>: line N has K fields, the header has H"``."""

    def __init__(self, f: Iterable[str], what: str, error: type[Exception] = CSVShapeError):
        self._reader = csv.reader(f)
        self.what, self.error = what, error
        try:
            self.fieldnames: list[str] | None = next(self._reader)
        except StopIteration:
            self.fieldnames = None
        self.line_num = self._reader.line_num

    def __iter__(self) -> Iterator[dict[str, str]]:
        header = self.fieldnames or []
        for row in self._reader:
            self.line_num = self._reader.line_num
            if not row:
                continue
            if len(row) != len(header):
                raise self.error(f"{self.what}: line {self.line_num} has {len(row)} field(s), "
                                 f"the header has {len(header)} ({','.join(header)})")
            yield dict(zip(header, row, strict=True))
