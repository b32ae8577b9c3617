"""The demo's model: a tiny open_clip trained for seconds with open_clip's ``ClipLoss`` on
the world's corpus, through the evaluation transform (a border mark is never cropped); a
folder already holding the same training is reused.
"""

from __future__ import annotations

import hashlib
import json
import logging
import random
import shutil
import tempfile
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from core.files import atomic_write_text

log = logging.getLogger(__name__)

TRAINING_FILE = "training.json"


@dataclass(frozen=True)
class TrainConfig:
    """The training settings (recorded in ``training.json``)."""

    steps: int = 150
    batch_size: int = 64
    lr: float = 1e-3
    weight_decay: float = 0.1
    seed: int = 0


def corpus_fingerprint(pairs: list[tuple[Any, str]]) -> str:
    """sha256 over every training image's pixels and its text, in order."""
    h = hashlib.sha256()
    for im, text in pairs:
        h.update(im.tobytes())
        h.update(text.encode("utf-8") + b"\0")
    return h.hexdigest()


def train_tiny_clip(pairs: list[tuple[Any, str]], base: Path, out: Path,
                    cfg: TrainConfig = TrainConfig()) -> dict[str, Any]:
    """Train from the open_clip folder ``base`` on ``pairs`` into ``out``; returns the training
    record (also ``out/training.json``). Deterministic for a corpus, settings and thread count."""
    fp = corpus_fingerprint(pairs)
    done = _reusable(out, cfg, fp)
    if done is not None:
        log.info("trained model %s is up to date (same settings and corpus): reused", out)
        return done
    import open_clip
    import torch
    from open_clip.loss import ClipLoss
    from safetensors.torch import save_file
    from tqdm.auto import tqdm

    torch.manual_seed(cfg.seed)
    order = random.Random(cfg.seed)
    name = f"local-dir:{base}"
    model, _, preprocess = open_clip.create_model_and_transforms(name)
    tokenizer = open_clip.get_tokenizer(name)
    t0 = time.perf_counter()
    images = torch.stack([preprocess(im) for im, _ in pairs])
    texts = tokenizer([t for _, t in pairs])
    loss_fn = ClipLoss()
    opt = torch.optim.AdamW(model.parameters(), lr=cfg.lr, weight_decay=cfg.weight_decay)
    model.train()
    losses = []
    bar = tqdm(range(cfg.steps), desc="demo training", unit="step")
    for _ in bar:
        b = order.sample(range(len(pairs)), min(cfg.batch_size, len(pairs)))
        img_f, txt_f, scale = model(images[b], texts[b])[:3]
        loss = loss_fn(img_f, txt_f, scale)
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.item())
        bar.set_postfix(loss=f"{losses[-1]:.3f}", refresh=False)
    took = time.perf_counter() - t0
    record = {"config": asdict(cfg), "corpus_sha256": fp, "pairs": len(pairs),
              "loss": "open_clip.loss.ClipLoss", "optimizer": "torch.optim.AdamW",
              "open_clip_version": open_clip.__version__, "torch_version": torch.__version__,
              "first_loss": round(losses[0], 4), "last_loss": round(losses[-1], 4),
              "mean_loss_last_10": round(sum(losses[-10:]) / len(losses[-10:]), 4),
              "seconds": round(took, 2), "threads": torch.get_num_threads(), "base": str(base)}
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{out.name}.", suffix=".tmp", dir=out.parent))
    try:
        shutil.copy2(base / "open_clip_config.json", tmp / "open_clip_config.json")
        state = {k: v.detach().contiguous() for k, v in model.state_dict().items()}
        save_file(state, str(tmp / "open_clip_model.safetensors"))
        atomic_write_text(tmp / TRAINING_FILE, json.dumps(record, indent=1) + "\n")
        if out.exists():  # only a folder of ours gets here (see _reusable)
            shutil.rmtree(out)
        tmp.rename(out)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    log.info("trained %s in %.1f s: loss %.3f -> %.3f", out, took, losses[0], losses[-1])
    return record


def _reusable(out: Path, cfg: TrainConfig, fp: str) -> dict[str, Any] | None:
    """``out``'s record when it holds this training, else None; never overwrites a stranger."""
    if not out.exists():
        return None
    marker = out / TRAINING_FILE
    if not marker.is_file():
        raise FileExistsError(f"{out} exists and was not written by the demo's training "
                              f"(no {TRAINING_FILE}); move it or choose another --workdir")
    try:
        rec = json.loads(marker.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    same = rec.get("config") == asdict(cfg) and rec.get("corpus_sha256") == fp
    return rec if same and (out / "open_clip_model.safetensors").is_file() else None
