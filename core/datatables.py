"""The one loader of the versioned tables in ``data/`` (``XCM_DATA_DIR`` points elsewhere):
nothing else hard-codes country codes, languages, locales or concepts."""

from __future__ import annotations

import io
import os
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

from core import files
from core.text import StrictDictReader, normalize_term


class TableError(ValueError):
    """A data table is missing or malformed."""


def data_dir() -> Path:
    """Folder holding the tables: ``$XCM_DATA_DIR`` or the repository's ``data/``."""
    env = os.environ.get("XCM_DATA_DIR")
    path = Path(env) if env else Path(__file__).resolve().parent.parent / "data"
    if not path.is_dir():
        raise TableError(f"data folder not found: {path} (set XCM_DATA_DIR)")
    return path


@dataclass(frozen=True)
class DataFile:
    """A file of ``data/``: where it is, its text, and the sha256 of its bytes."""

    name: str  # path relative to the data folder, e.g. "prompts/tagging.txt"
    path: Path
    text: str
    sha256: str


def data_path(name: str) -> Path:
    """Path of ``data/<name>`` (the file must exist); ``name`` may not leave the folder."""
    root = data_dir().resolve()
    path = (root / name).resolve()
    if root not in path.parents and path != root:
        raise TableError(f"{name!r} is outside the data folder")
    if not path.exists():
        raise TableError(f"missing data file {path}")
    return path


def data_file(name: str) -> DataFile:
    """``data/<name>`` as UTF-8 text with its sha256: the one way to read a file of ``data/``."""
    path = data_path(name)
    raw = path.read_bytes()
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise TableError(f"{path}: not UTF-8 ({exc})") from exc
    return DataFile(name, path, text, files.sha256_bytes(raw))


def data_csv(name: str) -> list[dict[str, str]]:
    """The rows of a CSV file of ``data/`` (read through :func:`data_file`)."""
    f = data_file(name)
    return list(StrictDictReader(io.StringIO(f.text, newline=""), str(f.path), TableError))


@dataclass(frozen=True)
class Country:
    """One of the benchmark's countries."""

    code: str  # ISO 3166-1 alpha-3
    name: str
    label: str  # the paper's short label (USA, UK, GER, ...)
    authors_name: str  # as written in the authors' xcm-bench.csv
    language: str  # BCP-47 of the native language
    language_name: str
    ddg_region: str | None  # DuckDuckGo region; None -> "wt-wt"
    cc_share: float | None  # Common Crawl share (%) of the language; None if unknown
    locale: str = ""  # BCP-47 with region (pt-PT is not pt-BR): the locale of its query terms
    native_name: str = ""  # the country's name in its language (native search queries)

    @property
    def search_region(self) -> str:
        return self.ddg_region or "wt-wt"


@dataclass(frozen=True)
class Language:
    """One of the 36 Crossmodal-3600 languages."""

    code: str
    name: str
    cc_share: float
    tier: str  # high / medium / low


def _read_csv(name: str, required: list[str]) -> list[dict[str, str]]:
    path = data_dir() / name
    if not path.is_file():
        raise TableError(f"missing table {path}")
    with path.open(newline="", encoding="utf-8") as f:
        reader = StrictDictReader(f, str(path), TableError)
        missing = [c for c in required if c not in (reader.fieldnames or [])]
        if missing:
            raise TableError(f"{path}: missing columns {missing}")
        return list(reader)


@lru_cache(maxsize=4)
def _countries(root: str) -> tuple[Country, ...]:
    rows = _read_csv(
        "countries.csv",
        ["code", "name", "label", "authors_name", "language", "locale", "language_name",
         "native_name", "ddg_region", "cc_share"],
    )
    out = []
    for r in rows:
        if r["locale"].split("-")[0] != r["language"] or "-" not in r["locale"]:
            raise TableError(f"countries.csv: {r['code']}: locale {r['locale']!r} is not "
                             f"{r['language']}-<REGION>")
        out.append(Country(
            code=r["code"],
            name=r["name"],
            label=r["label"],
            authors_name=r["authors_name"],
            language=r["language"],
            language_name=r["language_name"],
            ddg_region=r["ddg_region"] or None,
            cc_share=float(r["cc_share"]) if r["cc_share"] else None,
            locale=r["locale"],
            native_name=r["native_name"] or r["name"],
        ))
    return tuple(out)


def countries() -> tuple[Country, ...]:
    """All countries, in the table's order (the paper's order)."""
    return _countries(str(data_dir()))


def country(key: str) -> Country:
    """Look a country up by ISO code, paper label, English name or authors' name (any case)."""
    k = key.strip().lower()
    for c in countries():
        if k in {c.code.lower(), c.label.lower(), c.name.lower(), c.authors_name.lower()}:
            return c
    known = ", ".join(c.code for c in countries())
    raise TableError(f"unknown country {key!r} (known: {known})")


def resolve_countries(spec: str) -> list[Country]:
    """``all`` or a comma-separated list of codes/labels/names; a list that names no country
    (``""``, ``","``) is an error, never "none" or "all"."""
    if spec.strip().lower() == "all":
        return list(countries())
    out = [country(p) for p in spec.split(",") if p.strip()]
    if not out:
        raise TableError(f"--countries {spec!r} names no country: give codes such as THA,KEN "
                         "(data/countries.csv), or all")
    return out


@lru_cache(maxsize=4)
def _languages(root: str) -> tuple[Language, ...]:
    rows = _read_csv("xm3600_languages.csv", ["code", "name", "cc_share", "tier"])
    return tuple(Language(r["code"], r["name"], float(r["cc_share"]), r["tier"]) for r in rows)


def languages() -> tuple[Language, ...]:
    """The 36 XM3600 languages with Common Crawl share and tier."""
    return _languages(str(data_dir()))


def language(code: str) -> Language:
    for lang in languages():
        if lang.code == code:
            return lang
    raise TableError(f"unknown XM3600 language {code!r}")


def language_names() -> dict[str, str]:
    """BCP-47 code -> English name, over the XM3600 languages and the countries' languages."""
    out = {lang.code: lang.name for lang in languages()}
    for c in countries():
        out.setdefault(c.language, c.language_name)
    return out


def concepts() -> list[str]:
    """The curated concept list (``data/concepts.txt``), in index order."""
    path = data_dir() / "concepts.txt"
    if not path.is_file():
        raise TableError(f"missing table {path}")
    lines = path.read_text(encoding="utf-8").splitlines()
    return [normalize_term(ln) for ln in lines if ln.strip() and not ln.lstrip().startswith("#")]


DEFINITION_COLUMNS = ["concept", "definition", "source"]


def concept_definitions() -> dict[str, str]:
    """concept -> its one-line definition (what counts, what does not), from
    ``data/concept_definitions.csv``: exactly one non-empty line per concept of concepts.txt."""
    rows = _read_csv("concept_definitions.csv", DEFINITION_COLUMNS)
    known, out, problems = set(concepts()), {}, []
    for line, r in enumerate(rows, start=2):
        concept, text = normalize_term(r.get("concept")), normalize_term(r.get("definition"))
        if concept not in known:
            problems.append(f"line {line}: {concept!r} is not a concept of concepts.txt")
        elif concept in out:
            problems.append(f"line {line}: second definition of {concept!r}")
        elif not text or not normalize_term(r.get("source")):
            problems.append(f"line {line}: {concept!r} has an empty definition or source")
        else:
            out[concept] = text
    problems += [f"no definition of {c!r}" for c in concepts() if c not in out]
    if problems:
        raise TableError(f"{data_dir() / 'concept_definitions.csv'}: {len(problems)} "
                         f"problem(s); first: {problems[0]}")
    return out
