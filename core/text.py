"""One identity per text, below every package: :func:`normalize_term` (NFC, spaces collapsed),
:func:`same_term` (case and spacing aside), :func:`majority_terms` (most frequent spelling, a
tie to the smallest) and :class:`StrictDictReader` (a CSV row of the wrong width is refused,
where ``csv.DictReader`` shifts or drops values)."""

from __future__ import annotations

import csv
import unicodedata
from collections import Counter
from collections.abc import Iterable, Iterator, Mapping
from typing import Any


def normalize_term(text: Any) -> str:
    """NFC of ``text`` (``None`` is ``""``), stripped, inner whitespace runs one space."""
    return " ".join(unicodedata.normalize("NFC", str(text if text is not None else "")).split())


def same_term(a: str, b: str) -> bool:
    """Two terms are the same when they differ only in case, spacing or Unicode form."""
    return normalize_term(a).casefold() == normalize_term(b).casefold()


def term_counts(terms: Iterable[Any] | Mapping[Any, int]) -> Counter[str]:
    """Normalised non-empty terms counted (a mapping gives each term's count)."""
    items = terms.items() if isinstance(terms, Mapping) else ((t, 1) for t in terms)
    counts: Counter[str] = Counter()
    for t, k in items:
        n = normalize_term(t)
        if n:
            counts[n] += k
    return counts


def majority_terms(terms: Iterable[Any] | Mapping[Any, int]) -> str | None:
    """The most frequent normalised non-empty term, or None; a tie goes to the smallest term
    (code point order), so the choice never depends on the order of the rows."""
    counts = term_counts(terms)
    return min(counts.items(), key=lambda kv: (-kv[1], kv[0]))[0] if counts else None


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
