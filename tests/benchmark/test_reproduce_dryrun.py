"""``reproduce --dry-run``: sizes from a fake hub on 127.0.0.1, offline, a hub that never
answers, and the GPU-hour estimate from the data tables."""

from __future__ import annotations

import csv
import io
import json
import socket
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from benchmark import registry
from benchmark.cli import main
from benchmark.models import conventions
from benchmark.reproduce import dryrun
from benchmark.reproduce.plan import ReproduceConfig, build_plan
from benchmark.reproduce.suite import reproduce
from core import datatables

GME = "Alibaba-NLP/gme-Qwen2-VL-2B-Instruct"
GME_REV = "ce765ae71b8cdb208203cd8fb64a170b1b84293a"
FILES = {GME: [("model-00001-of-00002.safetensors", 4_000_000_000),
               ("model-00002-of-00002.safetensors", 418_000_000), ("config.json", 2_000)],
         "Chula-AI/association_bias_benchmark": [("data/train-0.parquet", 1_500_000_000)]}


class FakeHub(BaseHTTPRequestHandler):
    """``GET /api/{models,datasets}/<org>/<name>[/revision/<rev>]?blobs=true``."""

    seen: list[str] = []

    def do_GET(self) -> None:  # noqa: N802 - http.server's name
        FakeHub.seen.append(self.path)
        parts = self.path.split("?")[0].split("/")  # '', api, models, org, name, [revision, rev]
        repo = "/".join(parts[3:5])
        if repo not in FILES:
            body, code = b'{"error": "Repository not found"}', 404
        else:
            sha = parts[6] if len(parts) > 6 else "c" * 40
            body = json.dumps({"id": repo, "sha": sha, "siblings": [
                {"rfilename": f, "size": s} for f, s in FILES[repo]]}).encode()
            code = 200
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args) -> None:
        return


@pytest.fixture
def hub(monkeypatch):
    """A fake hub API on 127.0.0.1 with online mode switched on for this test only."""
    import huggingface_hub.constants as hc

    monkeypatch.setenv("HF_HUB_OFFLINE", "0")
    monkeypatch.setenv("TRANSFORMERS_OFFLINE", "0")
    monkeypatch.setattr(hc, "HF_HUB_OFFLINE", False)
    FakeHub.seen = []
    server = ThreadingHTTPServer(("127.0.0.1", 0), FakeHub)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


def dry(tmp_path: Path, **kw) -> ReproduceConfig:
    return ReproduceConfig(output_dir=tmp_path, dry_run=True, **kw)


def test_sizes_from_the_hub_api(tmp_path, hub):
    out = reproduce(dry(tmp_path, models="gme-qwen2-2b,hash", tasks="rq2"), endpoint=hub)
    text = out.dry_run
    assert f"{GME}@{GME_REV}  4.4 GB" in text
    assert "Chula-AI/association_bias_benchmark@" + "c" * 40 + "  1.5 GB" in text
    assert "total known: 5.9 GB" in text
    assert "nothing to download for: hash" in text
    assert f"/api/models/{GME}/revision/{GME_REV}?blobs=true" in FakeHub.seen
    assert not (tmp_path / "results").exists()  # a dry run runs nothing


def test_a_repo_the_hub_does_not_know(tmp_path, hub):
    text = reproduce(dry(tmp_path, models="jina-v4", tasks="rq1"), endpoint=hub).dry_run
    assert "jinaai/jina-embeddings-v4@853c867b65b749f3c3c72a06868140d842e04f06  size unknown: " \
           "hub lookup failed (HTTP 404)" in text


def test_offline_says_so_per_repo_and_asks_nothing(tmp_path, hub, monkeypatch):
    import huggingface_hub.constants as hc

    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setattr(hc, "HF_HUB_OFFLINE", True)
    text = reproduce(dry(tmp_path, models="gme-qwen2-2b", tasks="rq1,rq2"), endpoint=hub).dry_run
    lines = [ln for ln in text.splitlines() if ln.startswith(("  model", "  dataset"))]
    assert len(lines) == 3
    assert all("size unknown: hub unreachable (offline: HF_HUB_OFFLINE=1)" in ln for ln in lines)
    assert FakeHub.seen == []


def test_a_hub_that_never_answers_does_not_hang(tmp_path, monkeypatch):
    import huggingface_hub.constants as hc

    monkeypatch.setenv("HF_HUB_OFFLINE", "0")
    monkeypatch.setattr(hc, "HF_HUB_OFFLINE", False)
    sink = socket.socket()
    sink.bind(("127.0.0.1", 0))
    sink.listen(8)  # accepts connections, never answers
    try:
        t0 = time.perf_counter()
        text = reproduce(dry(tmp_path, models="gme-qwen2-2b", tasks="rq2", hub_timeout=0.3),
                         endpoint=f"http://127.0.0.1:{sink.getsockname()[1]}").dry_run
        took = time.perf_counter() - t0
    finally:
        sink.close()
    assert took < 10
    assert text.count("size unknown: hub unreachable (") == 2


def test_the_cli_dry_run_offline(tmp_path, capsys):
    assert main(["reproduce", "--output-dir", str(tmp_path), "--dry-run"]) == 0
    out = capsys.readouterr().out
    assert "reproduce plan: 40 job(s), 10 model(s)" in out
    assert out.count("size unknown: hub unreachable (offline") == 15
    assert "+ the LoRA base named in its adapter_config.json" in out
    assert "total 29.0 GPU-hours (estimate)" in out


def _rows(name: str) -> list[dict[str, str]]:
    return list(csv.DictReader(io.StringIO(datatables.data_file(name).text)))


def test_workload_counts_are_the_authors_files():
    w = dryrun.workload()
    bench = _rows("authors/xcm-bench.csv")
    cols = ("query_image_id", "semantically_relevant_candidate_image_id",
            "culturally_relevant_candidate_image_id", "non_relevant_candidate_image_id")
    assert w[("3xcm", "triplets")] == len(bench)
    assert w[("3xcm", "images")] == len({r[c] for r in bench for c in cols})
    assert w[("3xcm", "query_images")] == len({r["query_image_id"] for r in bench})
    assert w[("3xcm", "query_texts")] == len({(r["query_concept"], r["query_country"])
                                              for r in bench})
    assert w[("xm3600", "images")] == len(_rows("authors/xm3600-image-locales.csv"))


def test_estimate_arithmetic(tmp_path):
    plan = build_plan(ReproduceConfig(output_dir=tmp_path, models="gme-qwen2-2b,hash"))
    est = {(e.job.model, e.job.task): e for e in dryrun.estimate(plan)}
    w, rate = dryrun.workload(), dryrun.sized_rate("gme-qwen2-2b", dryrun.rates()["gme"])
    x = est[("gme-qwen2-2b", "xm3600-i2t")]
    assert (x.texts, x.images) == (w[("xm3600", "captions")], w[("xm3600", "images")])
    assert x.seconds == pytest.approx(x.texts * rate.text_s + x.images * rate.image_s)
    assert est[("gme-qwen2-2b", "analysis")].seconds == 0  # every embedding cached
    assert est[("hash", "3xcm")].seconds == 0 and est[("hash", "3xcm")].rate.kind == "exact"
    assert rate.kind == "estimate" and "3 A100-hours" in rate.source
    assert "2209M parameters" in rate.source
    # Table 6: 2209.0M of a 3169.58M mean -> 0.036 s x 0.6970 per item
    assert rate.text_s == pytest.approx(0.036 * 2209.0 / 3169.58, rel=1e-6)
    per_model = sum(e.seconds for (m, _), e in est.items() if m == "gme-qwen2-2b") / 3600
    assert per_model == pytest.approx(2.90 * 2209.0 / 3169.58, abs=0.01)


def test_costs_follow_table_6_sizes_and_keep_the_papers_total(tmp_path):
    """CLIP-L/14 (427.6M) costs 19x less than GME-7B (7070.6M); the ten together still cost
    the paper's ~29 A100-hours; a measured family row is used as it is."""
    plan = build_plan(ReproduceConfig(output_dir=tmp_path))
    est = dryrun.estimate(plan)
    hours: dict[str, float] = {}
    for e in est:
        hours[e.job.model] = hours.get(e.job.model, 0.0) + e.seconds / 3600
    assert hours["gme-qwen2-7b"] / hours["clip-l14"] == pytest.approx(7070.6 / 427.6, rel=1e-6)
    assert sum(hours.values()) == pytest.approx(29.0, abs=0.1)
    measured = dryrun.Rate("gme", 0.01, 0.02, "H200", "measured", "gpu_suite")
    assert dryrun.sized_rate("gme-qwen2-7b", measured) is measured
    assert dryrun.sized_rate("hash", dryrun.rates()["hash"]).kind == "exact"


def test_every_paper_model_has_its_downloads_listed(tmp_path):
    plan = build_plan(ReproduceConfig(output_dir=tmp_path))
    assert dryrun.nothing_to_download(plan) == []
    repos = {d.repo: d for d in dryrun.downloads(plan)}
    assert repos["vidore/colqwen2.5-v0.2"].revision == "6f6fcdfd1a114dfe365f529701b33d66b9349014"
    # mclip-xlmr-l14 loads ViT-L-14/openai under both profiles, never the B-16-plus tower
    assert repos["timm/vit_base_patch16_plus_clip_240.laion400m_e32"].models == (
        "mclip-xlmr-b16plus",)
    for profile in ("reference", "authors"):
        rec = conventions.resolve("mclip-xlmr-l14", profile)
        assert rec.options.get("image_model", "ViT-L-14/openai") == "ViT-L-14/openai"
    assert registry.models()["mclip-xlmr-l14"].kwargs["image_model"] == "ViT-L-14/openai"
    assert repos["Tierone2025part2/crossmodal_3600"].repo_type == "dataset"


def test_gpu_suite_throughputs_replace_the_size_estimate(tmp_path, capsys):
    """--gpu-suite FILE: per paper model 1 / the measured items per second of its text and
    image families; the families are exactly gpu_suite.py's; a tiny (CPU) run is refused."""
    from tests.perf import gpu_suite

    assert {f for pair in dryrun.SUITE_FAMILIES.values() for f in pair} == {
        f for t, i, _ in gpu_suite.PAPER.values() for f in (t, i)}
    fams = {f: {"texts_per_s": 100.0 * (n + 1), "images_per_s": 10.0 * (n + 1)}
            for n, f in enumerate(sorted({f for p in dryrun.SUITE_FAMILIES.values() for f in p}))}
    suite = tmp_path / "suite.json"
    suite.write_text(json.dumps({"device": "cuda", "gpu": "NVIDIA H200", "dtype": "bfloat16",
                                 "tiny": False, "families": fams}))
    rates = dryrun.suite_rates(suite)
    gme = rates["gme-qwen2-7b"]
    assert gme.kind == "measured" and gme.gpu == "NVIDIA H200"
    assert gme.text_s == pytest.approx(1 / fams["qwen2-vl-7b"]["texts_per_s"])
    assert rates["chinese-clip-l14"].image_s == pytest.approx(
        1 / fams["openclip-L14"]["images_per_s"])
    plan = build_plan(ReproduceConfig(output_dir=tmp_path, models="gme-qwen2-7b,hash"))
    est = {(e.job.model, e.job.task): e for e in dryrun.estimate(plan, rates)}
    x = est[("gme-qwen2-7b", "xm3600-i2t")]
    assert x.seconds == pytest.approx(x.texts * gme.text_s + x.images * gme.image_s)
    assert est[("hash", "3xcm")].rate.kind == "exact"
    assert main(["reproduce", "--output-dir", str(tmp_path / "r"), "--dry-run", "--models",
                 "gme-qwen2-7b", "--gpu-suite", str(suite)]) == 0
    assert "measured: tests/perf/gpu_suite.py on NVIDIA H200" in capsys.readouterr().out
    suite.write_text(json.dumps({"device": "cpu", "tiny": True, "families": fams}))
    assert main(["reproduce", "--output-dir", str(tmp_path / "r"), "--dry-run", "--gpu-suite",
                 str(suite)]) == 2
    assert "not a GPU run" in capsys.readouterr().err
