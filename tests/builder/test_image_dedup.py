"""Stage image_dedup on generated images with planted duplicates."""

from __future__ import annotations

import hashlib
import io
import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from PIL import Image

from benchmark.models.base import Adapter, ModelSpec
from builder.catalog import Catalog
from builder.crawl.stage import CrawlConfig, crawl
from builder.image_dedup import (
    DedupConfig,
    UnionFind,
    candidate_pairs,
    image_dedup,
    main,
    phash_ints,
)
from core.vectors import l2_normalize


def base(seed: int, size: tuple[int, int] = (160, 120)) -> Image.Image:
    """A smooth random picture (an upscaled 8x6 colour grid): distinct seeds, distinct phash."""
    small = np.random.default_rng(seed).integers(0, 256, (6, 8, 3), dtype=np.uint8)
    return Image.fromarray(small, "RGB").resize(size, Image.BICUBIC)


def enc(im: Image.Image, fmt: str, **kw: Any) -> bytes:
    buf = io.BytesIO()
    im.save(buf, fmt, **kw)
    return buf.getvalue()


def planted(root: Path) -> dict[str, bytes]:
    """food/THA and food/JPN with planted copies; file names fix the raw ranks (sorted)."""
    a = enc(base(1), "JPEG", quality=95)
    files = {
        "THA/01_a.jpg": a,
        "THA/02_a_reencoded.jpg": enc(Image.open(io.BytesIO(a)), "JPEG", quality=40),
        "THA/03_a_resized.png": enc(base(1).resize((96, 72), Image.LANCZOS), "PNG"),
        "THA/04_b.jpg": enc(base(2), "JPEG", quality=90),
        "THA/05_a_cropped.jpg": enc(base(1).crop((24, 18, 136, 102)).resize((160, 120)), "JPEG"),
        "THA/06_c.png": enc(base(3), "PNG"),
        "JPN/02_a_same_bytes.jpg": a,
        "JPN/01_b_webp.webp": enc(base(2, (200, 150)), "WEBP", quality=50),
        "JPN/03_d.jpg": enc(base(4), "JPEG"),
        "JPN/04_e.jpg": enc(base(5), "JPEG"),
        "JPN/05_f.jpg": enc(base(6), "JPEG"),
    }
    for rel, data in files.items():
        (root / "food" / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / "food" / rel).write_bytes(data)
    return files


@pytest.fixture
def catalog(tmp_path: Path):
    planted(tmp_path / "photos")
    with Catalog.open(tmp_path / "w") as cat:
        crawl(cat, CrawlConfig(search=f"folder:{tmp_path / 'photos'}"))
        yield cat


def statuses(cat: Catalog) -> dict[str, tuple[str, str | None]]:
    """file title -> (status, title of the kept item of its group)."""
    rows = cat.query("SELECT i.item_id, i.status, i.group_id, r.title FROM items i JOIN "
                     "search_results r ON r.search_id = i.search_id AND r.rank = i.rank")
    title = {r["item_id"]: r["title"] for r in rows}
    kept = {g["group_id"]: title[g["kept_item_id"]]
            for g in cat.query("SELECT group_id, kept_item_id FROM dedup_groups")}
    return {r["title"]: (r["status"], kept.get(r["group_id"])) for r in rows}


def test_phash_groups_reencoded_resized_and_identical_copies(catalog: Catalog) -> None:
    out = image_dedup(catalog, DedupConfig(model=None))
    assert statuses(catalog) == {
        "01_a.jpg": ("kept", "01_a.jpg"),
        "02_a_reencoded.jpg": ("near_duplicate", "01_a.jpg"),
        "03_a_resized.png": ("near_duplicate", "01_a.jpg"),
        "02_a_same_bytes.jpg": ("duplicate", "01_a.jpg"),
        "04_b.jpg": ("near_duplicate", "01_b_webp.webp"),  # the larger resolution is kept
        "01_b_webp.webp": ("kept", "01_b_webp.webp"),
        "05_a_cropped.jpg": ("kept", None),  # a crop is beyond phash: embeddings' job
        "06_c.png": ("kept", None), "03_d.jpg": ("kept", None), "04_e.jpg": ("kept", None),
        "05_f.jpg": ("kept", None),
    }
    assert out["items"] == {"duplicate": 1, "kept": 7, "near_duplicate": 3}
    assert out["groups"] == {"auto": 2}
    ev = json.loads(catalog.query("SELECT dedup_json FROM items WHERE status='near_duplicate' "
                                  "ORDER BY item_id LIMIT 1")[0][0])
    assert ev["phash_distance"] == 0 and ev["cosine"] is None
    phashes = catalog.query("SELECT COUNT(*) FROM images WHERE phash IS NOT NULL")[0][0]
    assert phashes == 10  # 11 items, 10 distinct byte strings


class PlantedAdapter(Adapter):
    """Embeddings chosen by the test: image pixels -> planted vector (counts its calls)."""

    def __init__(self, table: dict[str, np.ndarray]):
        super().__init__(ModelSpec(name="planted", family="test", checkpoint="planted",
                                   revision="1"), device="cpu", dtype="float32")
        self.table, self.calls = table, 0

    @staticmethod
    def key(im: Image.Image) -> str:
        return hashlib.sha256(im.convert("RGB").tobytes()).hexdigest()

    def _encode_image_batch(self, images: list[Any], role: str) -> np.ndarray:
        self.calls += len(images)
        return np.stack([self.table[self.key(im)] for im in images])


def planted_vectors(files: dict[str, bytes]) -> dict[str, np.ndarray]:
    """a* near one direction (the crop at cosine 0.97), c ~ d at 0.92 (review band)."""
    rng = np.random.default_rng(0)
    basis = l2_normalize(rng.standard_normal((8, 16)))
    basis = np.linalg.qr(basis.T)[0].T  # orthonormal rows
    group = {"a": 0, "b": 1, "c": 2, "d": 3, "e": 4, "f": 5}

    def vec(name: str) -> np.ndarray:
        g = name.split("_")[1][0]
        v = basis[group[g]].copy()
        if "cropped" in name:
            v = 0.97 * basis[0] + np.sqrt(1 - 0.97**2) * basis[6]
        if g == "d":
            v = 0.92 * basis[2] + np.sqrt(1 - 0.92**2) * basis[7]
        return v.astype(np.float32)

    return {PlantedAdapter.key(Image.open(io.BytesIO(b))): vec(Path(n).name)
            for n, b in files.items()}


def test_embeddings_join_crops_review_band_and_cache(tmp_path: Path) -> None:
    files = planted(tmp_path / "photos")
    adapter = PlantedAdapter(planted_vectors(files))
    cfg = DedupConfig(cosine=0.95, review_cosine=0.90, cache_dir=str(tmp_path / "cache"))
    with Catalog.open(tmp_path / "w") as cat:
        crawl(cat, CrawlConfig(search=f"folder:{tmp_path / 'photos'}"))
        out = image_dedup(cat, cfg, adapter=adapter)
        got = statuses(cat)
        first = [tuple(r) for r in cat.query("SELECT item_id, status, reason, dedup_json "
                                             "FROM items ORDER BY item_id")]
        review = cat.query("SELECT evidence_json FROM dedup_groups WHERE status='needs_review'")
        calls = adapter.calls
        image_dedup(cat, cfg, adapter=adapter)  # re-run: same result, no model work
        again = [tuple(r) for r in cat.query("SELECT item_id, status, reason, dedup_json "
                                             "FROM items ORDER BY item_id")]
    assert got["05_a_cropped.jpg"] == ("near_duplicate", "01_a.jpg")
    assert got["06_c.png"][0] == got["03_d.jpg"][0] == "needs_review"
    assert got["06_c.png"][1] == "03_d.jpg"  # proposed keep: same resolution, better rank
    assert got["04_e.jpg"] == ("kept", None) and got["05_f.jpg"] == ("kept", None)
    assert out["groups"] == {"auto": 2, "needs_review": 1}
    assert calls == 10 and adapter.calls == 10 and again == first
    edges = json.loads(review[0][0])["edges"]
    assert len(edges) == 1 and edges[0][3] == pytest.approx(0.92, abs=1e-4)
    crop = [r for r in first if r[1] == "near_duplicate" and "0.97" in r[2]]
    assert len(crop) == 1 and json.loads(crop[0][3])["cosine"] == pytest.approx(0.97, abs=1e-4)


def test_tiny_open_clip_matches_brute_force(tmp_path: Path) -> None:
    from benchmark.registry import load_model
    from tests.benchmark.models.tiny import tiny_openclip_dir

    planted(tmp_path / "photos")
    model = f"open_clip:local-dir:{tiny_openclip_dir(tmp_path / 'tiny')}"
    with Catalog.open(tmp_path / "w") as cat:
        crawl(cat, CrawlConfig(search=f"folder:{tmp_path / 'photos'}"))
        rows = cat.query("SELECT i.item_id, i.sha256, i.rank, im.ext, im.phash, "
                         "im.width * im.height AS px FROM items i JOIN images im USING (sha256) "
                         "ORDER BY item_id")
        adapter = load_model(model)
        ims = [Image.open(cat.workdir.image_path(r["sha256"], r["ext"])).convert("RGB")
               for r in rows]
        emb = l2_normalize(adapter.encode_images(ims))
        cos = emb @ emb.T
        thr = float(np.quantile(cos[np.triu_indices(len(rows), 1)], 0.8))
        image_dedup(cat, DedupConfig(model=model, cosine=thr, review_cosine=thr,
                                     cache_dir=str(tmp_path / "c")))
        ph = {r["sha256"]: r["phash"] for r in cat.query("SELECT sha256, phash FROM images")}
        got = {}
        for r in cat.query("SELECT item_id, group_id FROM items WHERE group_id IS NOT NULL"):
            got.setdefault(r["group_id"], set()).add(r["item_id"])
    hashes, _ = phash_ints([ph[r["sha256"]] for r in rows])
    uf = UnionFind(len(rows))
    for i in range(len(rows)):
        for j in range(i + 1, len(rows)):
            dist = bin(int(hashes[i]) ^ int(hashes[j])).count("1")
            if dist <= 4 or cos[i, j] >= thr:
                uf.union(i, j)
    want: dict[int, set[int]] = {}
    for i, r in enumerate(rows):
        want.setdefault(uf.find(i), set()).add(r["item_id"])
    expected = sorted(sorted(g) for g in want.values() if len(g) > 1)
    assert expected and sorted(map(sorted, got.values())) == expected


def test_blocked_pairs_equal_full_matrix() -> None:
    rng = np.random.default_rng(3)
    n = 300
    hashes = rng.integers(0, 2**63, n, dtype=np.uint64)
    hashes[50] = hashes[7] ^ np.uint64(0b101)  # distance 2
    valid = np.ones(n, bool)
    valid[9] = False
    emb = l2_normalize(rng.standard_normal((n, 8)).astype(np.float32))
    i, j, d, c = candidate_pairs(hashes, valid, emb, 4, 0.9, block_elements=1000)
    full = emb @ emb.T
    want = {(a, b) for a in range(n) for b in range(a + 1, n)
            if full[a, b] >= 0.9 or (a == 7 and b == 50)}
    assert set(zip(i.tolist(), j.tolist(), strict=True)) == want
    k = list(zip(i.tolist(), j.tolist(), strict=True)).index((7, 50))
    assert d[k] == 2
    assert np.allclose(c, full[i, j], atol=1e-6)
    ti, tj, td, tc = candidate_pairs(hashes, valid, emb, 4, 0.9, 1000, device="cpu")  # torch
    assert (ti.tolist(), tj.tolist(), td.tolist()) == (i.tolist(), j.tolist(), d.tolist())
    assert np.allclose(tc, c, atol=1e-5)


def test_reviewed_groups_are_left_alone_and_cli(catalog: Catalog, capsys) -> None:
    image_dedup(catalog, DedupConfig(model=None))
    with catalog.tx() as con:
        con.execute("UPDATE dedup_groups SET status='reviewed' WHERE group_id = "
                    "(SELECT MIN(group_id) FROM dedup_groups)")
        con.execute("UPDATE items SET status='removed' WHERE status='near_duplicate' AND "
                    "group_id = (SELECT MIN(group_id) FROM dedup_groups)")
    before = statuses(catalog)
    wd = str(catalog.workdir.root)
    assert main(["--model", "none", "--workdir", wd]) == 0
    assert "groups: auto 1, reviewed 1" in capsys.readouterr().out
    assert statuses(catalog)["02_a_reencoded.jpg"] == before["02_a_reencoded.jpg"]
    assert main(["--cosine", "0.8", "--review-cosine", "0.9", "--workdir", wd]) == 2
    assert main(["--model", "no-such-model", "--workdir", wd]) == 2
    assert "unknown model" in capsys.readouterr().err


def test_interrupted_run_resumes_to_the_same_statuses(tmp_path: Path, monkeypatch) -> None:
    import builder.image_dedup as mod

    planted(tmp_path / "photos")
    for d in ("THA", "JPN"):  # a second concept with the same pictures
        src, dst = tmp_path / "photos" / "food" / d, tmp_path / "photos" / "meal" / d
        dst.mkdir(parents=True)
        for f in src.iterdir():
            (dst / f.name).write_bytes(f.read_bytes())
    with Catalog.open(tmp_path / "clean") as cat:
        crawl(cat, CrawlConfig(search=f"folder:{tmp_path / 'photos'}"))
        image_dedup(cat, DedupConfig(model=None))
        clean = [tuple(r) for r in cat.query("SELECT concept, rank, status, reason FROM items "
                                             "ORDER BY item_id")]
    real = mod.dedup_concept
    with Catalog.open(tmp_path / "w") as cat:
        crawl(cat, CrawlConfig(search=f"folder:{tmp_path / 'photos'}"))

        def dies_on_meal(catalog, concept, *a, **kw):
            if concept == "meal":
                raise KeyboardInterrupt
            return real(catalog, concept, *a, **kw)

        monkeypatch.setattr(mod, "dedup_concept", dies_on_meal)
        with pytest.raises(KeyboardInterrupt):
            image_dedup(cat, DedupConfig(model=None))
        half = {r[0]: r[1] for r in cat.query("SELECT DISTINCT concept, status = 'ok' FROM items "
                                               "WHERE status IN ('ok', 'kept')")}
        assert half == {"food": 0, "meal": 1}  # food done and committed, meal untouched
        assert cat.last_run("image_dedup")["status"] == "interrupted"
        monkeypatch.setattr(mod, "dedup_concept", real)
        image_dedup(cat, DedupConfig(model=None))
        again = [tuple(r) for r in cat.query("SELECT concept, rank, status, reason FROM items "
                                             "ORDER BY item_id")]
    assert again == clean


def test_a_bad_cache_dir_is_one_line(catalog: Catalog, capsys) -> None:
    """A --cache-dir that is a file, or holds a corrupt embeddings.sqlite: one line, exit 2,
    before any model loads (the embedding model here would be the test's)."""
    wd = str(catalog.workdir.root)
    (Path(wd) / "afile").write_text("x")
    bad = Path(wd) / "badcache"
    bad.mkdir()
    (bad / "embeddings.sqlite").write_bytes(b"not a database" * 100)
    for cache, words in ((Path(wd) / "afile", "is a file"), (bad, "not a readable embedding")):
        capsys.readouterr()
        assert main(["--model", "hash", "--workdir", wd, "--cache-dir", str(cache)]) == 2
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and words in err[0], err


def test_pair_device_follows_the_one_backend_rule(monkeypatch):
    """The pairwise products follow core.devices.torch_device('auto', model device):
    numpy (None) on the CPU or without a model, torch on the model's GPU."""
    import types

    from builder import image_dedup
    from core import devices

    assert image_dedup.pair_device(None) is None
    assert image_dedup.pair_device(types.SimpleNamespace(device="cpu")) is None
    asked = []
    monkeypatch.setattr(devices, "torch_device",
                        lambda backend, device: asked.append((backend, device)) or "cuda:1")
    assert image_dedup.pair_device(types.SimpleNamespace(device="cuda:1")) == "cuda:1"
    assert asked == [("auto", "cuda:1")]
