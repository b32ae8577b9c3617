"""One identity per text (issue 22): the one normaliser, the one majority rule, the strict CSV
reader that every CSV of the project goes through."""

from __future__ import annotations

import io

import pytest

from core.text import CSVShapeError, StrictDictReader, majority_terms, normalize_term

NFD, NFC = "cafe\u0301", "caf\u00e9"


def test_normalize_term_is_nfc_and_one_space():
    assert NFD != NFC and normalize_term(NFD) == NFC
    assert normalize_term("  a \t b\n") == "a b" and normalize_term(None) == ""


def test_majority_terms_counts_normalised_spellings():
    assert majority_terms([NFD, "tea", NFC, " tea "]) == NFC  # 2 : 2, first seen wins
    assert majority_terms(["tea", NFD, "tea "]) == "tea"
    assert majority_terms(["", None]) is None


def test_strict_reader_names_file_and_line():
    text = 'a,b\n1,2\n\n"x\ny",3\n4,5,6\n'
    r = StrictDictReader(io.StringIO(text, newline=""), "f.csv")
    assert r.fieldnames == ["a", "b"]
    with pytest.raises(CSVShapeError, match=r"^f.csv: line 6 has 3 field\(s\), the header has 2 "
                                            r"\(a,b\)$"):
        rows = []
        for row in r:
            rows.append(row)
    assert rows == [{"a": "1", "b": "2"}, {"a": "x\ny", "b": "3"}]
    with pytest.raises(ValueError, match="line 2 has 1"):
        list(StrictDictReader(io.StringIO("a,b\n1\n"), "g", ValueError))
