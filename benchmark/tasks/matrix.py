"""``3xcm-matrix``: the same triplets queried in every language, to separate language from
culture (README.md, "`3xcm-matrix`: language vs culture").

Each triplet is asked once per query language L: its own country's term when that country
speaks L, else the ``generic_term`` of the first country of L in ``data/countries.csv``.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass
from typing import Any

import numpy as np

from benchmark.data import query_texts
from benchmark.metrics.association import (
    credits,
    group_scores,
    group_seed,
    sp_value,
    winners,
    zscores,
)
from benchmark.metrics.clustered import codes
from benchmark.metrics.significance import paired_association
from benchmark.tasks.base import RunContext, TaskOutput, embed_texts
from benchmark.tasks.xcm import (
    AssociationConfig,
    XCMTextToImage,
    embed_candidates,
    interval_settings,
    load_xcm,
    similarity_settings,
)
from core import datatables, query_table
from core.errors import DataError
from core.options import option

log = logging.getLogger(__name__)

QUERY_TEXT_RULE = ("a triplet of country K asked in language L: K's own term when L is K's "
                   "language, else the term of L's first country in countries.csv (en: USA, "
                   "es: ESP, pt: PRT), as its generic_term in data/queries.csv where the "
                   "texts are that table's")
CELL_KEYS = ("n", "wins_sem", "wins_cul", "wins_non", "ties", "M_sem", "M_sem_ci95", "M_cul",
             "M_cul_ci95", "M_non", "M_non_ci95", "SP", "SP_note", "SP_ci95", "units", "mde")


def parse_languages(spec: str | None) -> list[str]:
    """``--query-languages``: ``all`` (or unset), or a comma list of the countries' languages."""
    known = list(dict.fromkeys(c.language for c in datatables.countries()))
    if spec is None or spec.strip() == "all":
        return known
    langs = [x.strip() for x in spec.split(",") if x.strip()]
    if not langs:
        raise DataError("--query-languages: empty list")
    if "all" in langs:
        raise DataError("--query-languages: 'all' cannot be combined with other languages")
    for lang in langs:
        if lang not in known:
            hint = (f" (codes are lower case: {lang.lower()})" if lang.lower() in known
                    else f"; known: {','.join(known)}")
            raise DataError(f"--query-languages: unknown language {lang!r}{hint}")
    return list(dict.fromkeys(langs))


def language_plan(
    table: query_texts.QueryTexts, tr: Any, langs: list[str], query_term: str = "own",
) -> tuple[dict[str, np.ndarray], dict[str, list[str]], dict[str, Any], set[tuple[str, str]]]:
    """Per query language: the rows with a term in it, their texts, the skipped triplets and
    concepts; and every (concept, country) key of a term used."""
    own_texts: list[Any] = [None] * len(tr)
    if table.kind in ("published", "release"):
        own_texts = list(query_texts.choose_term(tr, table, query_term)[0]["query_text"])
    pairs = list(zip(tr["query_concept"], tr["query_country"], strict=True))
    concepts = tr["query_concept"].to_numpy()
    rows_for: dict[str, np.ndarray] = {}
    text_for: dict[str, list[str]] = {}
    skipped: dict[str, dict[str, Any]] = {}
    used: set[tuple[str, str]] = set()
    generic = query_texts.generic_texts(table)
    for lang in langs:
        code_of = {p: query_table.term_country(table.terms, p[0], lang, p[1]) for p in set(pairs)}
        keys = [None if code_of[p] is None else (p[0], code_of[p]) for p in pairs]
        have = np.array([k is not None for k in keys], bool)
        rows_for[lang] = np.nonzero(have)[0]
        text_for[lang] = [generic.get(k, table.terms[k].text) if k[1] != p[1] else
                          own or table.terms[k].text
                          for p, k, own in zip(pairs, keys, own_texts, strict=True)
                          if k is not None]
        used.update(k for k in keys if k is not None)
        missing = sorted({c for c, h in zip(concepts, have, strict=True) if not h})
        skipped[lang] = {"triplets": int((~have).sum()), "concepts": missing}
    return rows_for, text_for, skipped, used


@dataclass
class MatrixConfig(AssociationConfig):
    """``3xcm-matrix``: the 3XCM data, plus the query languages to ask in."""

    query_languages: str = option("'all' (the countries' languages) or a list like en,th,yo",
                                  "all")

    def __post_init__(self) -> None:
        parse_languages(self.query_languages)  # a bad list fails here, before any loading


class XCMMatrix(XCMTextToImage):
    name = "3xcm-matrix"
    description = "association bias per query language x image culture (language vs culture)"
    config_class = MatrixConfig
    config: MatrixConfig
    query_modality = "text"

    def prefill(self, ctx: RunContext) -> None:
        """``--shard``: embed the candidate images and every query text of every language."""
        cfg = self.config
        ds = load_xcm(ctx, cfg, with_texts=False)
        langs = parse_languages(cfg.query_languages)
        table = query_texts.table_for(ds, cfg.query_source)
        _, text_for, _, _ = language_plan(table, ds.triplets, langs, cfg.query_term)
        embed_candidates(ctx, ds)
        embed_texts(ctx, sorted({t for lang in langs for t in text_for[lang]}), "query")

    def run(self, ctx: RunContext) -> TaskOutput:
        cfg = self.config
        ds = load_xcm(ctx, cfg, with_texts=False)
        tr = ds.triplets
        langs = parse_languages(cfg.query_languages)
        table = query_texts.table_for(ds, cfg.query_source)
        rows_for, text_for, skipped, used = language_plan(table, tr, langs, cfg.query_term)
        prov = query_texts.provenance(table, used)
        query_texts.warn_unreviewed(prov, ctx.memo)
        d_emb, cand_idx, timings = embed_candidates(ctx, ds)
        texts = sorted({t for lang in langs for t in text_for[lang]})
        q_emb, qstats = embed_texts(ctx, texts, "query")
        timings["embed_texts_s"], timings["text_embedding"] = qstats.seconds, vars(qstats)
        tpos = {t: i for i, t in enumerate(texts)}
        t0 = time.perf_counter()
        credit_by_lang: dict[str, np.ndarray] = {}
        matrix: dict[str, dict[str, Any]] = {}
        by_language: dict[str, Any] = {}
        country = tr["query_country"].to_numpy().astype(str)
        concept, stratum = codes(tr["query_concept"])[1], codes(country)[1]
        b, seed = cfg.bootstrap, cfg.seed
        for lang in langs:
            rows = rows_for[lang]
            q_idx = np.array([tpos[t] for t in text_for[lang]], np.int64)
            sims = ctx.adapter.indexed_pair_similarity(
                q_emb, q_idx, d_emb, [ci[rows] for ci in cand_idx]).astype(np.float64)
            credit = credits(sims, cfg.ties)
            full = np.full((len(tr), 3), np.nan)
            full[rows] = credit
            credit_by_lang[lang] = full
            args = (credit, winners(sims)[1], zscores(sims), concept[rows], stratum[rows],
                    cfg.ci, b)
            by_language[lang] = group_scores(None, *args, group_seed(seed, f"lang:{lang}"))[""]
            cells = group_scores(country[rows], *args, seed, "country")  # 3xcm's seeds
            matrix[lang] = {k: {key: c[key] for key in CELL_KEYS if key in c}
                            for k, c in cells.items()}
        summary = self.summaries(tr, matrix, credit_by_lang)
        timings["scoring_s"] = time.perf_counter() - t0
        return TaskOutput(
            task={"name": self.name, "dataset": ds.dataset_id, "data_fingerprint": ds.fingerprint,
                  "n": len(tr), "source_format": ds.source_format, "query_languages": langs,
                  "query_texts": prov, "query_text_rule": QUERY_TEXT_RULE,
                  "skipped": skipped},
            scores={"matrix": matrix, "by_query_language": by_language, "summary": summary},
            settings={**interval_settings(cfg),
                      "paired_difference": "SP_diff = own - en on the triplets asked in both, "
                                           "paired by triplet; cluster-robust over concepts",
                      **similarity_settings(ctx.adapter, "text")},
            timings=timings,
        )

    def summaries(self, tr: Any, matrix: dict[str, Any], credit: dict[str, np.ndarray]
                  ) -> dict[str, Any]:
        """Per country: its own language's cell and the English one, with the paired SP
        difference (own - English) on the triplets asked in both."""
        out: dict[str, Any] = {}
        country = tr["query_country"].to_numpy().astype(str)
        for c in datatables.countries():
            mask = country == c.code
            if not mask.any():
                continue
            entry: dict[str, Any] = {"language": c.language}
            for key, lang in (("own_language", c.language), ("english", "en")):
                entry[key] = matrix.get(lang, {}).get(c.code)
            if c.language in credit and "en" in credit:
                ca, cb = credit[c.language][mask], credit["en"][mask]
                both = ~np.isnan(ca[:, 0]) & ~np.isnan(cb[:, 0])
                d = paired_association(ca[both], cb[both], concept=tr["query_concept"]
                                       .to_numpy()[mask][both])["overall"]
                entry["difference"] = {"n_paired": d["n"], "SP_diff": d["SP"]["diff"],
                                       "SP_diff_ci95": d["SP"]["ci95"], "p": d["SP"]["p"],
                                       "mde": d["SP"]["mde"]}
            out[c.code] = entry
        return out

    def format_table(self, out: TaskOutput) -> str:
        m = out.scores["matrix"]
        langs = list(m)
        countries = sorted({k for row in m.values() for k in row})
        head = "SP by query language (rows) x query culture (columns)"
        lines = [f"{self.name}  n={out.task['n']}", head,
                 f"{'':<6}" + "".join(f"{k:>7}" for k in countries)]
        for lang in langs:
            cells = [sp_value(m[lang].get(k)) for k in countries]
            lines.append(f"{lang:<6}" + "".join(
                f"{'-' if v is None else '∞' if v == float('inf') else f'{v:.2f}':>7}"
                for v in cells))
        lines.append("own language vs English: SP_own - SP_en [95% paired CI over concepts]"
                     + ("; ∞: no semantic win" if "∞" in "".join(lines) else ""))
        for k, s in out.scores["summary"].items():
            d = s.get("difference")
            if d and d["SP_diff"] is not None:
                lo, hi = d["SP_diff_ci95"]
                ci = "-" if lo is None else f"[{lo:+.2f}, {hi:+.2f}]"
                lines.append(f"  {k}: {d['SP_diff']:+.3f} {ci}")
        return "\n".join(lines)
