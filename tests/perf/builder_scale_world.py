"""The generated offline world of ``bench_builder_scale.py``: data tables, images, models.

A world of ``n`` images has ``n / per_cell`` (concept, country) cells: countries grow from 16
(the paper's) to 40 like an extension of 3XCM (the 24 added countries speak further XM3600
languages), concepts fill the rest (500 concepts x 40 countries x 50 images is 1M). Each cell is
a folder ``world/<concept>/<country>/NNNN.png`` of tiny images (32-48 px, made on the fly):
distinct images (random blocks on the cell's palette), plus planted problems the stages must
handle: resized copies (image dedup groups them) and identical copies (the crawl's byte
dedup).
"""

from __future__ import annotations

import csv
import io
import json
import os
import shutil
from collections import Counter
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parents[2]
MAX_COUNTRIES = 40
SERVER = "http://127.0.0.1:1"  # review: the payloads only; no server is contacted


def shape(n: int, per_cell: int) -> tuple[int, int]:
    """(countries, concepts) of an ``n``-image world with ``per_cell`` images per cell."""
    cells = max(1, n // per_cell)
    countries = int(min(MAX_COUNTRIES, max(16, round(16 + 24 * np.log10(max(cells, 1000) / 1000)
                                                     / np.log10(20)))))
    return countries, max(2, -(-cells // countries))


def data_dir(out: Path, n_countries: int, concepts: list[str]) -> Path:
    """A copy of ``data/`` with ``n_countries`` countries, the synthetic concept list as the
    curated list and an empty query table (the queries stage decides every term, offline)."""
    if out.exists():
        shutil.rmtree(out)
    shutil.copytree(ROOT / "data", out)
    with (out / "countries.csv").open(newline="", encoding="utf-8") as f:
        reader = csv.DictReader(f)
        fields = list(reader.fieldnames or [])
        rows = list(reader)
    used = {r["language"] for r in rows}
    with (out / "xm3600_languages.csv").open(newline="", encoding="utf-8") as f:
        langs = [r for r in csv.DictReader(f) if r["code"] not in used and "-" not in r["code"]]
    for i in range(max(0, n_countries - len(rows))):
        lang = langs[i % len(langs)]
        code = "Z" + chr(65 + i // 26) + chr(65 + i % 26)
        rows.append({**{k: "" for k in fields}, "code": code, "name": f"Country {code}",
                     "label": code, "authors_name": code, "language": lang["code"],
                     "locale": f"{lang['code']}-{code[1:]}", "language_name": lang["name"],
                     "native_name": f"Land {code}", "cc_share": lang["cc_share"],
                     "cc_share_source": "bench"})
    with (out / "countries.csv").open("w", newline="", encoding="utf-8") as f:
        w = csv.DictWriter(f, fieldnames=fields)
        w.writeheader()
        w.writerows(rows[:n_countries])
    (out / "concepts.txt").write_text("\n".join(concepts) + "\n", encoding="utf-8")
    with (out / "queries.csv").open(encoding="utf-8") as f:
        header = f.readline()
    (out / "queries.csv").write_text(header, encoding="utf-8")
    return out


def png(rng: np.random.Generator, base: np.ndarray, size: int) -> bytes:
    """A tiny PNG: the cell's palette under random 4x4 blocks (distinct perceptual hashes)."""
    from PIL import Image

    blocks = rng.integers(0, 160, (4, 4, 1)).astype(np.float32)
    img = np.kron(blocks, np.ones((size // 4, size // 4, 1), np.float32)) + base
    buf = io.BytesIO()
    Image.fromarray(np.clip(img, 0, 255).astype(np.uint8)).save(buf, "PNG", compress_level=1)
    return buf.getvalue()


def make_world(root: Path, concepts: list[str], codes: list[str], n: int, per_cell: int,
               seed: int = 0) -> dict[str, int]:
    """Write the image tree (exactly ``n`` files, cell by cell); returns the planted counts."""
    from PIL import Image

    rng = np.random.default_rng(seed)
    planted = {"images": 0, "resized_copies": 0, "identical_copies": 0}
    left = n
    for ci, concept in enumerate(concepts):
        for ki, code in enumerate(codes):
            if left <= 0:
                return planted
            cell = root / concept / code
            cell.mkdir(parents=True, exist_ok=True)
            base = np.array([(ci * 37) % 96, (ki * 53) % 96, ((ci + ki) * 29) % 96], np.float32)
            k = min(per_cell, left)
            size = 32 if (ci + ki) % 2 else 48
            last = b""
            for v in range(k):
                path = cell / f"{v:04d}.png"
                if v and v % 25 == 7:  # an identical copy of the previous file
                    path.write_bytes(last)
                    planted["identical_copies"] += 1
                elif v and v % 25 == 3:  # a resized copy of the previous file: near duplicate
                    with Image.open(io.BytesIO(last)) as im:
                        buf = io.BytesIO()
                        im.resize((size - 8, size - 8)).save(buf, "PNG")
                    path.write_bytes(buf.getvalue())
                    planted["resized_copies"] += 1
                else:
                    last = png(rng, base, size)
                    path.write_bytes(last)
                    planted["images"] += 1
            left -= k
    return planted


def tiny_clip(root: Path) -> Path:
    """The demo's tiny random-init open_clip ViT (32 px), as a ``local-dir:`` folder."""
    if not (root / "open_clip_model.safetensors").is_file():
        from pipeline.tiny_models import tiny_openclip_dir

        tiny_openclip_dir(root)
    return root


# -- stage drivers without a CLI of their own (no server, no API) ------------------------
def batch_prep(work: str) -> int:
    """The Batch API path of the tagging stage (``tagging_batch.run_batch_phase``) over every
    image, with the job's creation replaced by building its body (the ``InlinedRequest``
    payload ``submit`` sends) and nothing polled: the request building and its memory."""
    from google.genai import types

    from builder.catalog import Catalog
    from builder.llm.base import LLMConfig
    from builder.llm.client import make_llm
    from builder.prompts import load_prompt
    from builder.tagging import batch as tagging_batch
    from builder.tagging.rules import Img, TagContext, send_estimate
    from builder.tagging.stage import PROMPT, chunk, concept_list

    os.environ.setdefault("GEMINI_API_KEY", "bench-not-a-key")
    sent: dict[str, Any] = {"jobs": 0, "bytes": 0, "error": None}

    def submit(cat, ctx, groups, reqs, phase, run_id, counts) -> str:  # noqa: ANN001
        # never raises: run_batch_phase would record a failed creation as every image's
        # transient failure, and the later stages would find the pool untagged
        try:
            llm = ctx.llm
            for i, r in enumerate(reqs):
                types.InlinedRequest(contents=llm.contents(r.prompt, r.images),
                                     config=llm.request_config(r), metadata={"key": str(i)})
            sent["bytes"] += sum(tagging_batch.request_bytes(r) for r in reqs)
            sent["jobs"] += 1
        except Exception as exc:  # noqa: BLE001 - reported by the stage's exit code
            sent["error"] = repr(exc)
        return f"batches/bench-{sent['jobs']}"

    tagging_batch.submit = submit
    tagging_batch.poll_and_collect = lambda *a, **k: True
    with Catalog.open(work) as cat:
        llm = make_llm("gemini:gemini-2.5-flash", cat.workdir.llm_cache_path, LLMConfig(rpm=0))
        template, sha = load_prompt(*PROMPT)
        ctx = TagContext(cat.workdir, llm, template, sha, concept_list(cat))
        imgs = [Img(r[0], r[1], r[2], [r[3]]) for r in cat.query(
            "SELECT t.sha256, im.ext, im.format, MIN(i.concept) FROM tags t JOIN images im ON "
            "im.sha256 = t.sha256 JOIN items i ON i.sha256 = t.sha256 GROUP BY t.sha256 "
            "ORDER BY t.sha256")]
        tagging_batch.run_batch_phase(
            cat, ctx, lambda: chunk(imgs, 8, lambda im: send_estimate(cat.workdir, im)),
            "first", 0, Counter(), 0.0, 0.0, 2_000_000)
    if sent["error"] or not sent["jobs"]:
        raise RuntimeError(f"batch request building failed: {sent['error']}")
    return 0


def review_push(work: str) -> int:
    """Task payloads of both review kinds, and the task records a push makes."""
    from annotation.links import ImageLinks
    from annotation.projects import record_tasks, tag_concepts
    from annotation.push import duplicate_drafts, tag_drafts
    from builder.catalog import Catalog

    with Catalog.open(work) as cat:
        links = ImageLinks(cat.workdir.images_dir, "http://127.0.0.1:8081")
        dup, _ = duplicate_drafts(cat, links, ("needs_review", "auto"))
        n_tags = cat.query("SELECT COUNT(*) FROM tags")[0][0]
        tag, _ = tag_drafts(cat, links, tag_concepts(cat), n_tags // 10, 0)
        for kind, drafts in (("duplicates", dup), ("tags", tag)):
            tasks = [{"id": i + 1, "meta": {"task_key": d.key}, "data": d.data,
                      "predictions": [{"result": d.prediction}]} for i, d in enumerate(drafts)]
            json.dumps(tasks)  # the import payload
            record_tasks(cat, kind, SERVER, 1 if kind == "duplicates" else 2, tasks)
    return 0


def review_pull(work: str) -> int:
    """A generated export of the duplicates project (three annotators per task), pulled."""
    from annotation.decide import apply_duplicate_decisions, image_votes
    from annotation.projects import known_tasks
    from annotation.reviews import current_rows, parse_export, store_reviews
    from builder.catalog import Catalog

    with Catalog.open(work) as cat:
        tasks_rows = known_tasks(cat, "duplicates", SERVER, 1)
        export = []
        for k, row in enumerate(sorted(tasks_rows.values(), key=lambda r: r["task_id"])):
            n_img = len(json.loads(row["data_json"])["images"])
            anns = [{"id": k * 3 + a + 1, "completed_by": a + 1, "updated_at": "2026-01-01",
                     "result": [{"from_name": f"decision_{i}", "to_name": f"image_{i}",
                                 "type": "choices", "value": {"choices": [
                                     "keep" if i == 0 or (i + a) % 3 == 0 else "remove"]}}
                                for i in range(n_img)]} for a in range(3)]
            export.append({"id": row["task_id"], "annotations": anns})
        users = {1: "a@x", 2: "b@x", 3: "c@x"}
        task_map = {int(t["task_id"]): t for t in tasks_rows.values()}
        rows, _ = parse_export("duplicates", export, task_map, users)
        store_reviews(cat, "duplicates", 1, rows, None, set(task_map))
        current = current_rows(cat, "duplicates", 1)
        apply_duplicate_decisions(cat, tasks_rows.values(), image_votes(current), 2)
    return 0
