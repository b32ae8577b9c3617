"""The one place that decides the default device: ``cuda`` when torch is installed and sees a
GPU, else ``cpu``. Every adapter, the retrieval and embedding backends, the CLI's job planner
and the builder's embedders ask here (``--device`` always wins)."""

from __future__ import annotations


def has_gpu() -> bool:
    """True when torch is installed and sees a CUDA device (torch imported only if present)."""
    try:
        import torch
    except ImportError:
        return False
    return bool(torch.cuda.is_available())


def default_device() -> str:
    """``cuda`` when :func:`has_gpu`, else ``cpu``."""
    return "cuda" if has_gpu() else "cpu"


def torch_device(backend: str, device: str | None) -> str | None:
    """The one rule for a numpy/torch ``backend`` choice (``auto``, ``torch``, ``numpy``):
    the torch device to compute on, or None for numpy. ``auto`` is torch on a GPU (``device``
    cuda*, or none given and torch sees one) and numpy on the CPU; ``torch`` is torch on
    ``device`` (default :func:`default_device`) and raises ImportError without torch;
    ``numpy`` is numpy. ``auto`` never imports torch for a CPU device."""
    if backend == "numpy":
        return None
    if backend == "auto" and device is not None and device.startswith("cpu"):
        return None
    try:
        import torch
    except ImportError:
        if backend == "torch":
            raise
        return None
    resolved = device or default_device()
    if backend == "auto" and torch.device(resolved).type == "cpu":
        return None
    return resolved
