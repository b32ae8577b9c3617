"""The whole 3XCM pipeline in miniature (``python -m pipeline.demo``; docs/release.md): build a
release from a generated world (or ``--real``), train a tiny model with a planted bias, score
it, and say whether the evaluator found what was planted."""

from __future__ import annotations

import argparse
import json
import logging
import os
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from builder.stagekit import configure
from core.clikit import add_version, add_workdir, report
from core.files import atomic_write_text
from core.options import plain
from pipeline.demo_world import DEMO_CONCEPTS, PER_CELL, PLANTED, make_world, training_pairs
from pipeline.stages import STAGES
from pipeline.tiny_models import tiny_bge_m3, tiny_openclip_dir

log = logging.getLogger(__name__)

__all__ = ["DEMO_CONCEPTS", "PER_CELL", "DemoError", "Step", "main", "plan", "run_demo"]

# Countries whose query texts the demo shows: pairs sharing a language, with their own terms.
SHOWN_COUNTRIES = ("USA", "GBR", "ESP", "ARG", "PRT", "BRA")
REAL_CONCEPTS = DEMO_CONCEPTS[:3]
DEFAULT_WORKDIR = "./xcm-work/demo"  # under the ignored default work dir
REAL_MODEL = "gemini:gemini-2.5-flash"
WORLD_VERSION = 2  # the planted-association world (1: stripes and palettes, no plant)
PER_IMAGE = 1  # triplets per kept image in the offline demo: 72 per country
# Stages of the list the demo does not run, and why (printed where the stage would run).
SKIPPED = {
    "review": "needs a Label Studio server and annotators; the demo's dedup thresholds leave "
              "the review band empty, so no image waits for a decision",
}


class DemoError(RuntimeError):
    """A stage failed or could not run; the message names it."""


@dataclass(frozen=True)
class Step:
    """One step of the demo: a stage of the list (or the release export after it)."""

    name: str
    command: str
    argv: list[str]
    main: Callable[[list[str] | None], int] | None = None
    skip: str = ""  # why the demo skips the stage ("" = it runs)


def _stage_argv(w: Path, real: bool, seed: int) -> dict[str, list[str]]:
    """The demo's arguments for each stage it runs, by stage name."""
    work = str(w / "work")
    llm = REAL_MODEL if real else "offline"
    llm_args = ["--llm", llm, "--llm-rpm", "30" if real else "0"]
    concepts = REAL_CONCEPTS if real else DEMO_CONCEPTS
    search = ["--search", "ddgs", "--per-query", "4", "--languages", "english,native"] if real \
        else ["--search", f"folder:{w / 'world'}"]
    return {
        "concepts": ["--workdir", work, "--countries", "all", "--curated",
                     str(w / "concepts.txt"), "--n-concepts", "20", *llm_args],
        "concept_dedup": ["--workdir", work, "--embedder",
                          f"bge-m3:{w / 'models' / 'bge-m3-tiny'}", "--device", "cpu"],
        "queries": ["--workdir", work, "--countries", "all", *llm_args],
        "crawl": ["--workdir", work, "--countries", "all", "--concepts", ",".join(concepts),
                  *search],
        "image_dedup": ["--workdir", work, "--model",
                        f"open_clip:local-dir:{w / 'models' / 'clip-tiny'}",
                        "--phash-distance", "4", "--cosine", "0.9999", "--review-cosine",
                        "0.9999", "--cache-dir", str(w / "embeddings")],
        "tagging": ["--workdir", work, "--images-per-request", "8", *llm_args],
        "triplets": ["--workdir", work, "--seed", str(seed)] + ([] if real else [
            "--per-image", str(PER_IMAGE), "--candidate-countries", ",".join(control())]),
    }


def control() -> list[str]:
    """The countries without a planted mark: the offline demo's only semantic and non-relevant
    candidates, so only the cultural image can carry a mark."""
    from core import datatables

    return [c.code for c in datatables.countries() if c.code not in PLANTED]


def plan(w: Path, real: bool, seed: int) -> list[Step]:
    """Every stage of :data:`STAGES` in order (or why it is skipped), then the release export."""
    from triplets import cli as triplets_cli

    args = _stage_argv(w, real, seed)
    steps = []
    for st in STAGES:
        if st.name in SKIPPED:
            steps.append(Step(st.name, st.command_line, [], skip=SKIPPED[st.name]))
        elif st.name in args:
            steps.append(Step(st.name, st.command_line, args[st.name], st.main))
        else:
            raise DemoError(f"the demo has no arguments for stage {st.name!r}: add them to "
                            f"pipeline.demo._stage_argv or a reason to SKIPPED")
    export = ["export", "--workdir", str(w / "work"), "--out", str(w / "release")]
    steps.append(Step("triplets export", "python -m triplets", export, triplets_cli.main))
    return steps


def prepare(w: Path, real: bool) -> None:
    """The world (offline), the curated concept list and the tiny models."""
    concepts = REAL_CONCEPTS if real else DEMO_CONCEPTS
    w.mkdir(parents=True, exist_ok=True)
    (w / "concepts.txt").write_text("\n".join(concepts) + "\n", encoding="utf-8")
    marker = w / "world-planted.json"
    if not real and (w / "world").is_dir():
        rec = json.loads(marker.read_text()) if marker.is_file() else {}
        if rec.get("world_version") != WORLD_VERSION:
            raise DemoError(f"{w} holds the world of an older demo: choose a new --workdir "
                            f"(or remove {w})")
    if not real and not (w / "world").is_dir():
        planted = make_world(w / "world", concepts)
        atomic_write_text(marker, json.dumps({"world_version": WORLD_VERSION, **planted},
                                             indent=1))
    from core import datatables

    if not (w / "models" / "bge-m3-tiny" / "config.json").is_file():
        corpus = datatables.concepts() + [f"{c} {k.name}" for c in concepts for k in datatables.countries()]
        tiny_bge_m3(w / "models" / "bge-m3-tiny", corpus)
    if not (w / "models" / "clip-tiny" / "open_clip_model.safetensors").is_file():
        tiny_openclip_dir(w / "models" / "clip-tiny")


def run_step(step: Step) -> float:
    """Run one step (or say why it is skipped); raise :class:`DemoError` if it fails."""
    if step.skip:
        report(f"\n=== [{step.name}] {step.command}: skipped in the demo: {step.skip}")
        return 0.0
    report(f"\n=== [{step.name}] {step.command} {' '.join(step.argv)}")
    if step.main is None:
        raise DemoError(f"step {step.name} has no entry point")
    t0 = time.perf_counter()
    rc = step.main(step.argv)
    if rc:
        raise DemoError(f"stage {step.name} exited with code {rc}")
    return time.perf_counter() - t0


def load_release(release: Path, cache: Path) -> tuple[int, int]:
    """``datasets.load_dataset`` of both configs, offline; returns (triplets, images)."""
    import datasets

    trip = datasets.load_dataset(str(release), "triplets", split="test", cache_dir=str(cache))
    imgs = datasets.load_dataset(str(release), "images", cache_dir=str(cache))
    n_img = sum(len(s) for s in imgs.values())
    first = trip[0]
    report(f"\nload_dataset: {len(trip)} triplets, {n_img} images; first triplet: "
           f"{first['query_text']!r} ({first['query_concept']}, {first['query_country']})")
    report(query_text_line(trip))
    return len(trip), n_img


def query_text_line(trip: Any, concept: str = DEMO_CONCEPTS[0],
                    countries: tuple[str, ...] = SHOWN_COUNTRIES) -> str:
    """The release's query texts of ``concept`` in a few countries (PRT comboio, BRA trem)."""
    seen: dict[str, str] = {}
    for r in trip:
        if r["query_concept"] == concept and r["query_country"] in countries:
            seen.setdefault(r["query_country"], f"{r['query_text']} ({r['query_locale']})")
    return f"query texts of {concept!r}: " + ", ".join(
        f"{k} {seen[k]}" for k in countries if k in seen)


def evaluate(w: Path, model: str) -> Path:
    """``python -m benchmark run --model MODEL --task 3xcm`` on the release; the result file."""
    from benchmark import cli as bench
    from benchmark.results import model_slug

    out = w / "results"
    report(f"\n=== [evaluate] python -m benchmark run --model {model} --task 3xcm")
    rc = bench.main(["run", "--model", model, "--task", "3xcm", "--dataset", str(w / "release"),
                     "--output-dir", str(out), "--cache-dir", str(w / "embeddings"),
                     "--device", "cpu"])
    if rc:
        raise DemoError(f"the evaluator exited with code {rc}")
    return out / model_slug(model) / "3xcm.json"


def train(w: Path, seed: int) -> Path:
    """The demo's model, trained on the world's corpus with the release's native terms."""
    import pandas as pd

    from pipeline.demo_train import TrainConfig, train_tiny_clip

    trip = pd.concat(pd.read_parquet(p) for p in sorted((w / "release" / "triplets").glob(
        "*.parquet")))
    terms = {(r.query_concept, r.query_country): r.query_text for r in trip.itertuples()}
    pairs = training_pairs(DEMO_CONCEPTS, terms)
    out = w / "models" / "demo-clip"
    report(f"\n=== [train] a tiny open_clip, open_clip.loss.ClipLoss, {len(pairs)} (image, "
           f"native term) pairs")
    rec = train_tiny_clip(pairs, w / "models" / "clip-tiny", out, TrainConfig(seed=seed))
    report(f"trained in {rec['seconds']:.1f} s ({rec['config']['steps']} steps of "
           f"{rec['config']['batch_size']}): loss {rec['first_loss']} -> {rec['last_loss']}")
    return out


def tell(w: Path, result: Path) -> dict[str, Any]:
    """The verdicts and the paragraph; the report with galleries beside the results."""
    from benchmark.report.build import build_report
    from pipeline.demo_story import paragraph, verdicts

    res = json.loads(result.read_text(encoding="utf-8"))
    planted = json.loads((w / "world-planted.json").read_text(encoding="utf-8"))["association"]
    vs = verdicts(res["scores"], set(planted))
    text = paragraph(vs, planted, int(res["task"]["n"]), len(res["scores"].get("by_concept", {})))
    report("\n" + text)
    report("\n=== [report] python -m benchmark report results --output report")
    files = build_report([w / "results"], w / "report", compare_authors=False,
                         title="3XCM demo: a planted association",
                         gallery_datasets=[w / "release"], intro=text)
    report(f"report: {files.get('html', w / 'report')}")
    story = {"paragraph": text, "result": str(result),
             "verdicts": [{**v.__dict__, "found": v.found, "clear": v.clear,
                           "as_planted": v.as_planted} for v in vs]}
    atomic_write_text(w / "demo.json", json.dumps(story, indent=1, default=list) + "\n")
    return story


def run_demo(workdir: str | Path, real: bool = False, seed: int = 0) -> dict[str, Any]:
    """Prepare, run the plan, load the release, train (offline), score, tell; returns the record."""
    w = Path(workdir).resolve()
    timings: dict[str, float] = {}
    t0 = time.perf_counter()

    def timed(name: str, fn: Callable[..., Any], *args: Any) -> Any:
        t1 = time.perf_counter()
        value = fn(*args)
        timings[name] = time.perf_counter() - t1
        return value

    timed("prepare", prepare, w, real)
    for step in plan(w, real, seed):
        took = run_step(step)
        if not step.skip:
            timings[step.name] = took
    n_trip, n_img = load_release(w / "release", w / "hf-cache")
    out: dict[str, Any] = {"triplets": n_trip, "images": n_img, "release": str(w / "release")}
    if real:
        out["results"] = str(timed("evaluate", evaluate, w, "hash"))
    else:
        model = timed("train", train, w, seed)
        result = timed("evaluate", evaluate, w, f"open_clip:local-dir:{model}")
        out["story"] = timed("report", tell, w, result)
        out["results"] = str(result)
    timings["total"] = time.perf_counter() - t0
    out["timings"] = timings
    return out


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m pipeline.demo",
                                description=plain(__doc__.split("\n\n")[0]))
    add_version(p)
    add_workdir(p, default=DEFAULT_WORKDIR, help=f"demo folder (default {DEFAULT_WORKDIR})")
    p.add_argument("--real", action="store_true",
                   help="real services on a small scope (needs network and GEMINI_API_KEY)")
    p.add_argument("--seed", type=int, default=0, help="triplet sampling seed (default 0)")
    args = p.parse_args(argv)
    if args.real and not (os.environ.get("GEMINI_API_KEY") or os.environ.get("GOOGLE_API_KEY")):
        report("error: --real needs GEMINI_API_KEY (or GOOGLE_API_KEY) and network access",
               error=True)
        return 2
    # The models are built locally and the release is a local folder: never ask the Hub.
    for var in ("HF_HUB_OFFLINE", "HF_DATASETS_OFFLINE", "TRANSFORMERS_OFFLINE"):
        os.environ.setdefault(var, "1")
    configure()
    try:
        out = run_demo(args.workdir, args.real, args.seed)
    except DemoError as e:
        report(f"error: {e}", error=True)
        return 1
    t = out["timings"]
    report(f"\ndemo done in {t['total']:.0f} s: {out['triplets']} triplets over {out['images']} "
           f"images; release {out['release']}; results {out['results']}"
           + (f"; report {Path(args.workdir).resolve() / 'report' / 'report.html'}"
              if "story" in out else ""))
    report("  " + ", ".join(f"{k} {v:.1f}s" for k, v in t.items() if k != "total"))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
