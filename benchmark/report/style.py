"""Matplotlib set-up shared by every figure: a headless backend and, for Thai, Devanagari,
Arabic and CJK labels, the installed Noto fonts as glyph fallbacks (a missing one is logged).
"""

from __future__ import annotations

import logging
from functools import lru_cache
from typing import Any

from core import files

log = logging.getLogger(__name__)

# Latin first, then one family per script; the first installed one of each group is used.
FONT_GROUPS: dict[str, list[str]] = {
    "latin": ["Noto Sans", "DejaVu Sans"],
    "thai": ["Noto Sans Thai", "Noto Sans Thai UI", "Noto Serif Thai", "Noto Looped Thai"],
    "devanagari": ["Noto Sans Devanagari", "Noto Serif Devanagari"],
    "arabic": ["Noto Sans Arabic", "Noto Naskh Arabic", "Noto Kufi Arabic"],
    "cjk": ["Noto Sans CJK JP", "Noto Sans CJK SC", "Noto Serif CJK JP", "WenQuanYi Zen Hei"],
}
APT_PACKAGES = ("fonts-noto-core", "fonts-noto-cjk")

DPI = 150


@lru_cache(maxsize=1)
def font_families() -> tuple[str, ...]:
    """The installed fallback chain (Latin first), warning once per script without a font."""
    from matplotlib import font_manager

    installed = {f.name for f in font_manager.fontManager.ttflist}
    chain: list[str] = []
    for script, names in FONT_GROUPS.items():
        found = next((n for n in names if n in installed), None)
        if found:
            chain.append(found)
        else:
            log.warning("no font for %s script (install %s); labels may show boxes",
                        script, " ".join(APT_PACKAGES))
    if "DejaVu Sans" not in chain:
        chain.append("DejaVu Sans")  # matplotlib's bundled font: always present
    return tuple(chain)


def setup() -> Any:
    """Select the Agg backend, set fonts and sizes readable at the saved size; return pyplot."""
    import matplotlib

    matplotlib.use("Agg", force=False)
    import matplotlib.pyplot as plt

    plt.rcParams.update({
        "font.family": list(font_families()),
        "font.size": 10,
        "axes.titlesize": 11,
        "axes.labelsize": 10,
        "xtick.labelsize": 9,
        "ytick.labelsize": 9,
        "legend.fontsize": 8,
        "figure.dpi": 100,
        "savefig.dpi": DPI,
        "savefig.bbox": "tight",
        "axes.unicode_minus": False,
    })
    return plt


def save(fig: Any, path: Any) -> None:
    """Save ``fig`` as PNG atomically (:func:`core.files.atomic_path`) and close it."""
    import matplotlib.pyplot as plt

    try:
        with files.atomic_path(path, suffix=".png") as tmp:
            fig.savefig(tmp, format="png")
    finally:
        plt.close(fig)
