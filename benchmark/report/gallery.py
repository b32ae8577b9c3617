"""Galleries: the evidence behind a score, as static pages under ``OUTPUT/gallery/``.

Per 3XCM task, dataset and model the triplets it got wrong, and any two models side by side;
per ``xm3600-i2t`` model each image's top captions. Data files are scripts that assign JSON
(browsers refuse ``fetch`` of ``file://``); thumbnails are content-addressed
(``thumbs/ab/<sha256>.jpg``), shared by every page; a page renders ``page_size`` items at a time.
"""

from __future__ import annotations

import contextlib
import io
import json
import logging
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from benchmark.data.images import ImageStore
from benchmark.report import page
from benchmark.report.collect import Collection
from benchmark.results import ResultFile, model_slug
from benchmark.tasks.xcm import CANDIDATE_COLUMNS, OUTCOME_TRIPLET_COLUMNS, SIM_COLUMNS
from core import datatables, files, query_table
from core.devices import cpu_threads
from core.errors import DataError

log = logging.getLogger(__name__)

ASSOCIATION_TASKS = ("3xcm", "3xcm-i2i")
PREVALENCE_TASK = "xm3600-i2t"
DEFAULT_PAGE_SIZE = 24
THUMB_PX = 160
NEEDED = ["triplet_id", "query_country", "winner", *OUTCOME_TRIPLET_COLUMNS, *SIM_COLUMNS]
XM_NEEDED = ["query_image_id", "query_locale", "top_caption", "top_language", "top_relevant"]


@dataclass
class GalleryOut:
    """What was written: (title, path relative to OUTPUT) per page, and what was left out."""

    pages: list[tuple[str, str]] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    thumbs_written: int = 0
    written: list[Path] = field(default_factory=list)  # every file, thumbnails included


def js_assign(var: str, key: str | None, obj: Any) -> str:
    """A script that stores ``obj`` (strict JSON) in ``window[var]`` (or ``window[var][key]``)."""
    body = json.dumps(obj, ensure_ascii=False, allow_nan=False, separators=(",", ":"))
    body = body.replace("</", "<\\/")  # never end the script early
    if key is None:
        return f"window.{var}={body};\n"
    return f"window.{var}=window.{var}||{{}};window.{var}[{json.dumps(key)}]={body};\n"


def thumbnail(data: bytes, px: int = THUMB_PX) -> bytes:
    """A JPEG at most ``px`` on its longer side (decoded under the pixel cap)."""
    from core.decode import decode_image

    im = decode_image(data, "image").convert("RGB")
    im.thumbnail((px, px))
    buf = io.BytesIO()
    im.save(buf, "JPEG", quality=82)
    return buf.getvalue()


def write_thumbs(store: ImageStore | None, ids: list[str], gallery: Path,
                 out: GalleryOut) -> dict[str, str]:
    """image id -> thumbnail path (``thumbs/ab/<sha256>.jpg``) for every id the store holds;
    missing files are made on every core, an existing one is not redone."""
    if store is None:
        return {}
    rel: dict[str, str] = {}
    todo: dict[str, str] = {}  # path -> an image id with that content
    for iid in ids:
        sha = store.sha256.get(iid)
        if sha is None:
            continue
        path = f"thumbs/{sha[:2]}/{sha}.jpg"
        rel[iid] = path
        if path not in todo and not (gallery / path).is_file():
            todo[path] = iid
    bad = set()
    with ThreadPoolExecutor(max(1, min(cpu_threads(), len(todo)))) as pool:
        for path, ok in zip(todo, pool.map(lambda p: _write_thumb(store, todo[p], gallery / p),
                                           todo), strict=True):
            if ok:
                out.thumbs_written += 1
            else:
                bad.add(path)
    if bad:
        out.notes.append(f"gallery: {sum(p in bad for p in rel.values())} image(s) could not "
                         "be decoded for thumbnails")
    rel = {i: p for i, p in rel.items() if p not in bad}
    out.written += [gallery / p for p in dict.fromkeys(rel.values())]
    return rel


def _write_thumb(store: ImageStore, iid: str, dest: Path) -> bool:
    """One thumbnail written atomically; False when the image does not decode."""
    try:
        files.atomic_write_bytes(dest, thumbnail(store.read(iid)))
    except DataError:
        return False
    return True


def open_images(candidates: list[str]) -> tuple[ImageStore | None, str | None]:
    """The images of the first local dataset or folder in ``candidates``, else (None, why)."""
    from benchmark.data.layouts import XCMSource, open_xcm

    tried = []
    for c in dict.fromkeys(candidates):
        p = Path(c)
        if not p.is_dir():
            tried.append(f"{c} (not a local folder)")
            continue
        try:
            return open_xcm(XCMSource(dataset=str(p))).images, None
        except DataError as e:
            first = str(e).splitlines()[0] if str(e) else type(e).__name__
            with contextlib.suppress(DataError):  # else a plain folder of images
                if (store := ImageStore.from_folder(p)).ids:
                    return store, None
            tried.append(f"{c} ({first})")
    return None, "no images for thumbnails: " + ("; ".join(tried) or "no dataset recorded") + \
        " (pass --gallery-dataset)"


def usable_outcomes(out: GalleryOut, task: str, model: str, path: Path, r: ResultFile,
                    need: list[str], old: list[str]) -> pd.DataFrame | None:
    """A run's outcomes with the ``need`` columns, else None and why: an older version's
    outcomes put the model in ``old`` (:func:`note_old`), anything else is a note."""
    from benchmark.report.compare import CompareError, load_outcomes

    rec, df = getattr(r, "outcomes", None), None
    if isinstance(rec, dict) and set(need) <= set(rec.get("columns") or need):
        try:
            df = load_outcomes(path, r).reset_index()
        except CompareError as e:
            out.notes.append(f"gallery {task} {model}: {e}")
            return None
    if df is None or not set(need) <= set(df.columns):
        old.append(model)
        return None
    return df


def note_old(out: GalleryOut, task: str, models: list[str]) -> None:
    """One note for the runs of ``task`` too old for a gallery."""
    if models:
        out.notes.append(f"gallery {task}: left out {len(models)} run(s) whose outcomes lack "
                         "the triplets' similarities or captions (an older version wrote them; "
                         f"run the task again): {', '.join(sorted(models))}")


def triplet_table(df: pd.DataFrame, thumbs: dict[str, str]) -> dict[str, Any]:
    """The shared triplets file: rows in country, concept, id order; repeated strings indexed."""
    order = {c.code: i for i, c in enumerate(datatables.countries())}
    df = df.assign(_o=df["query_country"].map(order).fillna(len(order)))
    df = df.sort_values(["_o", "query_country", "query_concept", "triplet_id"], kind="stable")
    countries = list(dict.fromkeys(df["query_country"]))
    concepts = sorted(set(df["query_concept"]))
    texts = list(dict.fromkeys(df["query_text"]))
    try:  # (concept, country) -> the English term of the shipped query table
        eng = {t.key: t.english_term for t in query_table.read_query_table()}
    except (OSError, datatables.TableError):
        eng = {}
    images = list(dict.fromkeys(np.concatenate(
        [df[c].to_numpy() for c in ("query_image_id", *CANDIDATE_COLUMNS)])))
    ix = {v: i for i, v in enumerate(images)}
    return {
        "ids": df["triplet_id"].tolist(),
        "countries": countries, "concepts": concepts, "texts": texts,
        "english": [eng.get((c, k), c) for c, k in zip(df["query_concept"], df["query_country"],
                                                        strict=True)],
        "images": images, "thumbs": [thumbs.get(i) for i in images],
        "country": df["query_country"].map({c: i for i, c in enumerate(countries)}).tolist(),
        "concept": df["query_concept"].map({c: i for i, c in enumerate(concepts)}).tolist(),
        "text": df["query_text"].map({t: i for i, t in enumerate(texts)}).tolist(),
        "query_image": df["query_image_id"].map(ix).tolist(),
        "candidates": np.stack([df[c].map(ix).to_numpy() for c in CANDIDATE_COLUMNS],
                               axis=1).tolist(),
    }


def model_data(df: pd.DataFrame, ids: list[str], name: str) -> dict[str, Any]:
    """One model's winner and similarities per triplet, in the triplets file's order."""
    d = df.set_index("triplet_id").loc[ids]
    sims = d[SIM_COLUMNS].to_numpy(np.float64)
    return {"name": name, "winner": d["winner"].astype(int).tolist(),
            "sims": [[round(float(x), 6) for x in row] for row in sims]}


def write_page(gallery: Path, rel: str, title: str, config: dict[str, Any],
               scripts: list[str], out: GalleryOut) -> None:
    """A gallery page: shared script and style, its data scripts, ``config`` as inert JSON."""
    up = "../" * rel.count("/")
    write(gallery / rel, page.render_template("gallery.html", title=title, config=config,
                                              scripts=scripts, up=up), out)
    out.pages.append((title, f"gallery/{rel}"))


def write(path: Path, text: str, out: GalleryOut) -> None:
    files.atomic_write_text(path, text)
    out.written.append(path)


def association_galleries(col: Collection, gallery: Path, task: str, datasets: list[Path],
                          page_size: int, out: GalleryOut) -> None:
    """One 3XCM task's per-model and side-by-side pages per dataset, one model in memory."""
    for fp in col.fingerprints((task,)):
        runs = sorted((k[0], col.run_paths[k], r) for k, r in col.runs.items()
                      if k[1] == task and k[2] == fp)
        sub, old, models = f"{task}-{fp[:12]}", [], {}
        trip: dict[str, Any] | None = None
        first = ""
        for model, path, r in runs:
            df = usable_outcomes(out, task, model, path, r, NEEDED, old)
            if df is None:
                continue
            label, slug = col.label(model), model_slug(model)
            try:
                if trip is None:
                    trip = dataset_triplets(df, task, fp, gallery, datasets,
                                            [str(x[2].task.dataset) for x in runs], out)
                    write(gallery / sub / "triplets.js", js_assign("XCM_TRIPLETS", None, trip),
                          out)
                    first = label
                elif len(df) != len(trip["ids"]) or set(df["triplet_id"]) != set(trip["ids"]):
                    out.notes.append(f"gallery {task} {label}: other triplets than {first} on "
                                     "the same data: left out")
                    continue
                data = model_data(df, trip["ids"], label)
            except (KeyError, TypeError, ValueError, IndexError) as e:
                out.notes.append(f"gallery {task} {label}: malformed outcomes ({type(e).__name__}"
                                 f": {e}): left out")
                continue
            write(gallery / sub / f"model-{slug}.js", js_assign("XCM_MODELS", label, data), out)
            models[label] = f"model-{slug}.js"
            write_page(gallery, f"{sub}/{slug}.html", f"{label}: {task} triplets it got wrong",
                       {"kind": "wrong", "task": task, "model": label, "pageSize": page_size,
                        "thumbRoot": "../"}, ["triplets.js", models[label]], out)
        note_old(out, task, old)
        if len(models) > 1:
            write_page(gallery, f"{sub}/compare.html",
                       f"{task}: two models side by side (where they disagree)",
                       {"kind": "compare", "task": task, "models": models,
                        "pageSize": page_size, "thumbRoot": "../"}, ["triplets.js"], out)


def dataset_triplets(df: pd.DataFrame, task: str, fp: str, gallery: Path, datasets: list[Path],
                     recorded: list[str], out: GalleryOut) -> dict[str, Any]:
    """The shared triplets file of one dataset, its thumbnails written."""
    store, why = open_images([*map(str, datasets), *recorded])
    if why:
        out.notes.append(f"gallery {task}: {why}")
    cols = NEEDED[5:9] if task == "3xcm-i2i" else NEEDED[6:9]  # a text query has no image
    ids = list(dict.fromkeys(np.concatenate([df[c].to_numpy() for c in cols]).astype(str)))
    trip = triplet_table(df, write_thumbs(store, ids, gallery, out))
    trip.update(task=task, fingerprint=fp, n=len(df))
    return trip


def xm3600_galleries(col: Collection, gallery: Path, page_size: int, out: GalleryOut) -> None:
    """Per model of ``xm3600-i2t``: per image its top captions and LBKL/DLBKL."""
    old: list[str] = []
    for (model, task, fp), r in sorted(col.runs.items()):
        if task != PREVALENCE_TASK:
            continue
        df = usable_outcomes(out, task, model, col.run_paths[(model, task, fp)], r, XM_NEEDED,
                             old)
        if df is None:
            continue
        label, sub, slug = col.label(model), f"{task}-{fp[:12]}", model_slug(model)
        try:
            data = xm3600_data(df, r, label)
        except (KeyError, TypeError, ValueError, IndexError) as e:
            out.notes.append(f"gallery {task} {label}: malformed outcomes ({type(e).__name__}: "
                             f"{e}): left out")
            continue
        write(gallery / sub / f"model-{slug}.js", js_assign("XCM_XM3600", None, data), out)
        write_page(gallery, f"{sub}/{slug}.html", f"{label}: {task} top captions per image",
                   {"kind": "xm3600", "task": task, "model": label, "pageSize": page_size},
                   [f"model-{slug}.js"], out)
    note_old(out, PREVALENCE_TASK, old)


def xm3600_data(df: pd.DataFrame, r: ResultFile, label: str) -> dict[str, Any]:
    ks = [int(k) for k in getattr(r.task, "ks", None) or []]
    metrics = [f"{m}@{k}" for m in ("lbkl", "dlbkl") for k in ks if f"{m}@{k}" in df.columns]
    return {"name": label, "metrics": metrics,
            "ids": df["query_image_id"].astype(str).tolist(),
            "locale": df["query_locale"].astype(str).tolist(),
            "values": [[None if not np.isfinite(v) else round(float(v), 6) for v in row]
                       for row in df[metrics].to_numpy(np.float64)] if metrics else [],
            "captions": [list(map(str, c)) for c in df["top_caption"]],
            "languages": [list(map(str, c)) for c in df["top_language"]],
            "relevant": [list(map(bool, c)) for c in df["top_relevant"]]}


def build_galleries(col: Collection, output: Path, datasets: list[Path] | None = None,
                    page_size: int = DEFAULT_PAGE_SIZE) -> GalleryOut:
    """Write ``output/gallery/`` (see the module docstring); returns the pages and notes."""
    if page_size < 1:
        raise DataError(f"--gallery-page-size must be >= 1, got {page_size}")
    gallery = output / "gallery"
    out = GalleryOut()
    for task in ASSOCIATION_TASKS:
        association_galleries(col, gallery, task, list(datasets or []), page_size, out)
    xm3600_galleries(col, gallery, page_size, out)
    if not out.pages:
        return out
    for name in ("gallery.js", "gallery.css"):
        write(gallery / "assets" / name, (page.TEMPLATES / name).read_text(encoding="utf-8"), out)
    write(gallery / "index.html", page.render_template(
        "gallery_index.html", pages=[(t, p[len("gallery/"):]) for t, p in out.pages]), out)
    return out
