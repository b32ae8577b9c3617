"""``reproduce --dry-run``: what a plan would download, and how many GPU hours it would take.

Sizes come from the hub API with a deadline per request (offline: none asked); GPU hours are
the items each job embeds (``data/reproduce/workload.csv``) times per-item seconds
(``item_seconds.csv`` scaled by Table 6 size, or a ``gpu_suite.py`` measurement).
"""

from __future__ import annotations

import json
import queue
import threading
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from benchmark import registry, zoo
from benchmark.models import hub
from benchmark.reproduce import pins
from benchmark.reproduce.plan import Job, Plan
from core import datatables
from core.hub import one_line


@dataclass(frozen=True)
class Download:
    repo: str
    repo_type: str  # model | dataset
    revision: str | None
    role: str
    models: tuple[str, ...]
    size: int | None = None  # bytes at that revision (None: unknown)
    note: str = ""


LORA_NOTE = "+ the LoRA base named in its adapter_config.json (not listed: size unknown)"


def downloads(plan: Plan) -> list[Download]:
    """Every hub repo the plan needs (one row per repo and revision), sizes not yet known."""
    records = zoo.models()
    found: dict[tuple[str, str, str | None], Download] = {}

    def add(repo: str, kind: str, rev: str | None, role: str, model: str, note: str = "") -> None:
        key = (repo, kind, rev)
        old = found.get(key)
        if old is None:
            found[key] = Download(repo, kind, rev, role, (model,), note=note)
        elif model not in old.models:
            found[key] = replace(old, models=(*old.models, model))

    for model in plan.models:
        mine = records[model].pinned_downloads() if model in records else ()
        base_listed = any(d.role.startswith("LoRA base") for d in mine)
        for d in mine:
            lora = d.role.startswith("LoRA adapter") and not base_listed
            add(d.repo, d.repo_type, d.revision, d.role, model, LORA_NOTE if lora else "")
    for job in plan.jobs:
        ds = job.dataset
        if not ds.local:
            role = "XM3600 (RQ1)" if job.task == "xm3600-i2t" else "3XCM (RQ2)"
            add(ds.spec, "dataset", ds.revision, role, job.model)
    return [with_recorded(d, plan) for d in found.values()]


def _recorded_part(d: Download, parts: dict[str, str]) -> str | None:
    """The ``repo@commit`` a model's first run recorded for the repo of row ``d``."""
    if parts.get("checkpoint", "").startswith(f"{d.repo}@"):
        return parts["checkpoint"]
    key = "image_revision" if "image tower" in d.role else (
        "base_revision" if d.role.startswith("LoRA base") else None)
    return parts.get(key) if key else None


def with_recorded(d: Download, plan: Plan) -> Download:
    """An unpinned row with what the output dir's first run recorded for it, if anything."""
    if d.revision:
        return d
    recorded = pins.load(plan.output_dir / pins.PINS_FILE)
    if d.repo_type == "dataset":
        fp = recorded["datasets"].get(f"{d.repo} (unpinned)")
        note = f"recorded by the first run: data fingerprint {fp[:12]}" if fp else ""
        return replace(d, note=_join(d.note, note)) if fp else d
    for model in d.models:
        part = _recorded_part(d, recorded["models"].get(model) or {})
        if part:
            return replace(d, revision=part.rsplit("@", 1)[1],
                           note=_join(d.note, "recorded by the first run (unpinned upstream)"))
    return d


def nothing_to_download(plan: Plan) -> list[str]:
    """Planned models with no hub repo listed (hash, user adapters, family:arg names)."""
    records = zoo.models()
    return [m for m in plan.models if m not in records or not records[m].downloads]


def with_deadline(fn: Callable[[], Any], seconds: float) -> Any:
    """``fn()`` in a daemon thread; TimeoutError after ``seconds`` (the thread is abandoned)."""
    out: queue.Queue[tuple[bool, Any]] = queue.Queue(maxsize=1)

    def target() -> None:
        try:
            out.put((True, fn()))
        except BaseException as e:  # noqa: BLE001 - handed to the caller
            out.put((False, e))

    threading.Thread(target=target, daemon=True).start()
    try:
        ok, value = out.get(timeout=seconds)
    except queue.Empty:
        raise TimeoutError(f"no answer in {seconds:g} s") from None
    if not ok:
        raise value
    return value


def repo_size(d: Download, endpoint: str | None, timeout: float) -> Download:
    """``d`` with its size from the hub API, or a note saying why the size is unknown."""
    if hub.offline():
        return replace(d, note=_join("size unknown: hub unreachable (offline: HF_HUB_OFFLINE=1)",
                                     d.note))
    from huggingface_hub import HfApi

    api = HfApi(endpoint=endpoint)
    info_fn = api.dataset_info if d.repo_type == "dataset" else api.model_info
    try:
        info = with_deadline(lambda: info_fn(d.repo, revision=d.revision, files_metadata=True,
                                             timeout=timeout), timeout + 1.0)
    except Exception as e:  # noqa: BLE001 - network, DNS, timeout, 404: one note per repo
        status = getattr(getattr(e, "response", None), "status_code", None)
        why = f"hub lookup failed (HTTP {status})" if status else f"hub unreachable ({one_line(e)})"
        return replace(d, note=_join(f"size unknown: {why}", d.note))
    sizes = [s.size for s in (info.siblings or []) if s.size is not None]
    if not sizes:
        return replace(d, note=_join("size unknown: the hub gave no file sizes", d.note))
    rev = d.revision or getattr(info, "sha", None)
    return replace(d, size=int(sum(sizes)), revision=rev)


def _join(*parts: str) -> str:
    return "; ".join(p for p in parts if p)


@dataclass(frozen=True)
class Rate:
    family: str
    text_s: float
    image_s: float
    gpu: str
    kind: str  # estimate | measured | exact
    source: str


@dataclass(frozen=True)
class JobEstimate:
    job: Job
    texts: int
    images: int
    seconds: float
    rate: Rate


def rates() -> dict[str, Rate]:
    return {r["family"]: Rate(r["family"], float(r["text_s"]), float(r["image_s"]), r["gpu"],
                              r["kind"], r["source"])
            for r in datatables.data_csv("reproduce/item_seconds.csv")}


def workload() -> dict[tuple[str, str], int]:
    return {(r["dataset"], r["what"]): int(r["count"])
            for r in datatables.data_csv("reproduce/workload.csv")}


def family_of(model: str) -> str:
    """The module stem of a model's adapter (``benchmark.models.colqwen:...`` -> colqwen)."""
    e = registry.models().get(model)
    target = e.target if e else model
    return target.split(":")[0].rsplit(".", 1)[-1]


def items(job: Job, w: dict[tuple[str, str], int]) -> tuple[int, int]:
    """(texts, images) a job embeds that no earlier job of the same model embedded."""
    if job.task == "3xcm":
        return w[("3xcm", "query_texts")], w[("3xcm", "images")]
    if job.task == "3xcm-i2i":  # candidates cached by 3xcm; query images in the query role
        return 0, w[("3xcm", "query_images")]
    if job.task == "xm3600-i2t":
        return w[("xm3600", "captions")], w[("xm3600", "images")]
    return 0, 0  # analysis: every embedding is in the cache


def sized_rate(model: str, base: Rate) -> Rate:
    """A paper model's per-item seconds scaled by its Table 6 size (``base x P / mean(P)``: the
    ten models' total unchanged); a measured family row wins."""
    from benchmark.reproduce.paper import alias_of

    params = {n: m.parameters for n, m in zoo.paper_models().items() if m.parameters is not None}
    if base.kind != "estimate" or model not in params:
        return base
    mean = sum(params.values()) / len(params)
    f = params[model] / mean
    return Rate(f"{base.family} ({alias_of(model)})", base.text_s * f, base.image_s * f,
                base.gpu, "estimate", f"Table 6: {params[model]:g}M parameters / the ten models' mean "
                f"{mean:.1f}M x {base.text_s:g} s (the paper's ~3 A100-hours per model, "
                "redistributed by size; the ten models' total unchanged)")


# our paper model -> (text family, image family) of tests/perf/gpu_suite.py's measurements
SUITE_FAMILIES = {
    "clip-l14": ("openclip-L14", "openclip-L14"),
    "chinese-clip-l14": ("bert-base-zh", "openclip-L14"),
    "mclip-xlmr-l14": ("xlmr-large", "openclip-L14"),
    "mclip-xlmr-b16plus": ("xlmr-base", "openclip-B16plus"),
    "colqwen2.5-v0.2": ("qwen2.5-vl-3b", "qwen2.5-vl-3b"),
    "colqwen2.5-3b-m": ("qwen2.5-vl-3b", "qwen2.5-vl-3b"),
    "colqwen2.5-7b-m": ("qwen2.5-vl-7b", "qwen2.5-vl-7b"),
    "gme-qwen2-2b": ("qwen2-vl-2b", "qwen2-vl-2b"),
    "gme-qwen2-7b": ("qwen2-vl-7b", "qwen2-vl-7b"),
    "jina-v4": ("qwen2.5-vl-3b", "qwen2.5-vl-3b"),
}


def suite_rates(path: Path) -> dict[str, Rate]:
    """Per paper model, the seconds per text and image a ``tests/perf/gpu_suite.py --out FILE``
    GPU run measured; any other file is one line (exit 2)."""
    from benchmark.reproduce.plan import PlanError

    try:
        raw = json.loads(Path(path).read_text(encoding="utf-8"))
        fams, gpu = raw["families"], raw.get("gpu") or raw.get("device") or "?"
        if raw.get("tiny") or not str(raw.get("device", "")).startswith("cuda"):
            raise PlanError(f"--gpu-suite {path}: not a GPU run (device {raw.get('device')!r}"
                            f"{', tiny shapes' if raw.get('tiny') else ''})")
        out = {}
        for model, (tf, imf) in SUITE_FAMILIES.items():
            out[model] = Rate(f"gpu-suite {tf}/{imf}", 1.0 / float(fams[tf]["texts_per_s"]),
                              1.0 / float(fams[imf]["images_per_s"]), str(gpu), "measured",
                              f"tests/perf/gpu_suite.py on {gpu}, {raw.get('dtype')}: "
                              f"{tf} texts, {imf} images (random weights; search excluded)")
        return out
    except PlanError:
        raise
    except (OSError, ValueError, KeyError, TypeError, ZeroDivisionError) as e:
        raise PlanError(f"--gpu-suite {path}: not a gpu_suite.py --out file ({type(e).__name__}:"
                        f" {e})") from None


def estimate(plan: Plan, measured: dict[str, Rate] | None = None) -> list[JobEstimate]:
    """Seconds per job: ``measured`` rates where given, else item_seconds.csv by Table 6 size."""
    r, w = rates(), workload()
    out = []
    for job in plan.jobs:
        rate = (measured or {}).get(job.model) or sized_rate(
            job.model, r.get(family_of(job.model)) or r["*"])
        t, i = items(job, w)
        out.append(JobEstimate(job, t, i, t * rate.text_s + i * rate.image_s, rate))
    return out


def human_bytes(n: int | None) -> str:
    if n is None:
        return "size unknown"
    x = float(n)
    for unit in ("B", "KB", "MB", "GB"):
        if x < 1000:
            return f"{x:.1f} {unit}" if unit != "B" else f"{int(x)} B"
        x /= 1000
    return f"{x:.1f} TB"


def format_dry_run(plan: Plan, items_: list[Download], ests: list[JobEstimate]) -> str:
    lines = [f"reproduce plan: {len(plan.jobs)} job(s), {len(plan.models)} model(s), "
             f"results in {plan.results_dir}", "", "downloads:"]
    for d in items_:
        rev = d.revision or "unpinned (latest; the first run records it)"
        size = human_bytes(d.size) if d.size is not None else ""
        lines.append(f"  {d.repo_type:<7} {d.repo}@{rev}  " + "; ".join(x for x in (size, d.note) if x)
                     + f"  [{d.role}; {', '.join(d.models[:3])}"
                     + f"{' ...' if len(d.models) > 3 else ''}]")
    known = sum(d.size for d in items_ if d.size is not None)
    unknown = sum(d.size is None for d in items_)
    lines.append(f"  total known: {human_bytes(known)}" + (f" (+ {unknown} repo(s) of unknown "
                                                          "size)" if unknown else ""))
    quiet = nothing_to_download(plan)
    if quiet:
        lines.append(f"  nothing to download for: {', '.join(quiet)}")
    lines += ["", "GPU hours (items x per-item seconds; the published datasets' item counts):"]
    by_model: dict[str, list[JobEstimate]] = {}
    for e in ests:
        by_model.setdefault(e.job.model, []).append(e)
    for model, es in by_model.items():
        rate = es[0].rate
        gpu = f"{rate.gpu}-hours" if rate.gpu != "none" else "GPU-hours (no GPU work)"
        lines.append(f"  {model:<22} {sum(e.seconds for e in es) / 3600:7.2f} {gpu} "
                     f"({rate.kind}; {sum(e.texts for e in es):,} texts, "
                     f"{sum(e.images for e in es):,} images)")
    total = sum(e.seconds for e in ests) / 3600
    kinds = sorted({e.rate.kind for e in ests})
    lines.append(f"  total {total:.1f} GPU-hours ({', '.join(kinds)})")
    for rate in {e.rate.family: e.rate for e in ests}.values():
        lines.append(f"  rate {rate.family}: {rate.text_s:g} s/text, {rate.image_s:g} s/image, "
                     f"{rate.kind}: {rate.source}")
    return "\n".join(lines)
