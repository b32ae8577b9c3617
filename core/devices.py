"""The one place that decides the default device (``cuda`` when torch is installed and sees a
GPU, else ``cpu``; ``--device`` always wins), the numpy/torch rule of every kernel, and the
cores this process may use."""

from __future__ import annotations

import os
import sys


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
    """The torch device a numpy/torch ``backend`` choice computes on, None for numpy: ``auto``
    is torch on a GPU (``device`` cuda*, or none given and torch, already imported, sees one:
    it never imports torch, as a process without it holds nothing on a GPU); ``torch`` is
    torch on ``device`` (ImportError without torch)."""
    if backend == "numpy":
        return None
    if backend == "auto" and (device.startswith("cpu") if device else "torch" not in sys.modules):
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


def cpu_threads() -> int:
    """The cores this process may run on."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        return os.cpu_count() or 1
