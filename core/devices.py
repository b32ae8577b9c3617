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
    """The one rule for a numpy/torch ``backend`` choice (``auto``, ``torch``, ``numpy``):
    the torch device to compute on, or None for numpy. ``auto`` is torch on a GPU (``device``
    cuda*, or none given, torch already imported and seeing one) and numpy on the CPU: it
    never imports torch, as a process that has not imported it holds nothing on a GPU;
    ``torch`` is torch on ``device`` (default :func:`default_device`) and raises ImportError
    without torch; ``numpy`` is numpy."""
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
