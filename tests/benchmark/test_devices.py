"""One rule for the default device and for a numpy/torch backend choice."""

from __future__ import annotations

import sys

import pytest

from benchmark import embeddings, retrieval
from core import devices


def test_auto_is_numpy_on_the_cpu_and_torch_on_a_gpu(monkeypatch):
    torch = pytest.importorskip("torch")
    assert devices.torch_device("numpy", "cuda") is None
    assert devices.torch_device("auto", "cpu") is None
    assert devices.torch_device("torch", "cpu") == "cpu"
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    assert devices.default_device() == "cpu" and not devices.has_gpu()
    assert devices.torch_device("auto", None) is None
    assert devices.torch_device("torch", None) == "cpu"
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    assert devices.default_device() == "cuda" and devices.has_gpu()
    assert devices.torch_device("auto", None) == "cuda"
    assert devices.torch_device("auto", "cuda:1") == "cuda:1"


def test_without_torch_auto_is_numpy_and_torch_is_an_import_error(monkeypatch):
    monkeypatch.setitem(sys.modules, "torch", None)  # `import torch` raises ImportError
    assert devices.default_device() == "cpu" and not devices.has_gpu()
    assert devices.torch_device("auto", None) is None
    with pytest.raises(ImportError):
        devices.torch_device("torch", None)


def test_retrieval_and_maxsim_follow_the_same_rule(monkeypatch):
    pytest.importorskip("torch")
    assert retrieval.get_backend("auto", "cpu").name in ("faiss", "numpy")
    assert embeddings.Device("auto", "cpu").torch is None
    assert embeddings.Device("torch", "cpu").torch is not None
    assert retrieval.get_backend("torch", "cpu").name == "torch"
