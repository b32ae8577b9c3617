"""2-D UMAP projections of text and image embeddings, as PNG scatter plots and parquet.

The paper's parameters (``n_neighbors=15``, ``min_dist=0.1``, ``random_state=42``); with few
points the neighbourhood shrinks to ``n - 1`` (recorded), under ``MIN_POINTS`` none.
"""

from __future__ import annotations

import logging
import time
import warnings
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from core import files

log = logging.getLogger(__name__)

N_NEIGHBORS = 15
MIN_DIST = 0.1
RANDOM_STATE = 42
MIN_POINTS = 5


def umap_2d(
    x: np.ndarray, n_neighbors: int = N_NEIGHBORS, min_dist: float = MIN_DIST,
    random_state: int = RANDOM_STATE, metric: str = "euclidean",
) -> tuple[np.ndarray, dict[str, Any]]:
    """(n, 2) UMAP coordinates and the parameters actually used (with the seconds taken)."""
    x = np.asarray(x, np.float32)
    n = x.shape[0]
    if n < MIN_POINTS:
        raise ValueError(f"UMAP needs at least {MIN_POINTS} points, got {n}")
    k = min(n_neighbors, n - 1)
    t0 = time.perf_counter()
    import umap

    with warnings.catch_warnings():
        # "n_jobs value 1 overridden to 1 by setting random_state": expected, seeded on purpose.
        warnings.filterwarnings("ignore", message=".*n_jobs.*", category=UserWarning)
        reducer = umap.UMAP(n_neighbors=k, min_dist=min_dist, random_state=random_state,
                            metric=metric, n_components=2)
        coords = reducer.fit_transform(x)
    params = {"n_neighbors": k, "n_neighbors_requested": n_neighbors, "min_dist": min_dist,
              "random_state": random_state, "metric": metric, "n": n,
              "umap_version": umap.__version__, "seconds": time.perf_counter() - t0}
    return np.asarray(coords, np.float64), params


def save_coords(path: Path, frame: pd.DataFrame) -> None:
    """Write the coordinates table as parquet, atomically."""
    with files.atomic_path(path, suffix=".parquet") as tmp:
        frame.to_parquet(tmp, index=False)


def scatter(
    coords: np.ndarray, labels: list[str], legend: dict[str, str], title: str, path: Path,
    notes: list[tuple[int, str]] | None = None, order: list[str] | None = None,
) -> None:
    """Scatter plot coloured by label, legend outside the axes; ``notes`` (row index, text)
    are written next to their points (native-script query terms)."""
    from benchmark.report import style

    plt = style.setup()
    labels_arr = np.asarray(labels)
    keys = order or sorted(set(labels))
    cmap = plt.get_cmap("tab20" if len(keys) > 10 else "tab10")
    fig, ax = plt.subplots(figsize=(8.5, 6.5))
    size = 12 if len(labels) > 2000 else 22
    for i, key in enumerate(keys):
        m = labels_arr == key
        if not m.any():
            continue
        ax.scatter(coords[m, 0], coords[m, 1], s=size, alpha=0.7, color=cmap(i % cmap.N),
                   label=f"{legend.get(key, key)} ({int(m.sum())})", linewidths=0)
    for idx, text in notes or []:
        ax.annotate(text, coords[idx], fontsize=8, xytext=(3, 3), textcoords="offset points",
                    bbox={"boxstyle": "round,pad=0.15", "fc": "white", "ec": "none",
                          "alpha": 0.7})
    ax.set(title=title, xlabel="UMAP 1", ylabel="UMAP 2")
    ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), frameon=False,
              markerscale=1.5, ncol=1 if len(keys) <= 20 else 2)
    style.save(fig, path)
