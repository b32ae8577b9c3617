"""The registry: lazy targets, duplicates, suggestions, user adapters, missing extras."""

from __future__ import annotations

import numpy as np
import pytest

from benchmark import registry
from benchmark.models.base import Adapter, UserAdapter


class PlainAdapter:
    """A user's adapter: no base class, only the two encode methods."""

    def encode_texts(self, texts):
        return np.ones((len(texts), 4))

    def encode_images(self, images):
        return np.ones((len(images), 4))


def test_duplicate_names_are_errors():
    with pytest.raises(registry.RegistryError, match="registered twice"):
        registry.register_model("hash", "x:Y")
    with pytest.raises(registry.RegistryError, match="registered twice"):
        registry.register_task("3xcm", "x:Y")


def test_typo_suggests_close_names():
    with pytest.raises(registry.RegistryError, match="did you mean hash"):
        registry.load_model("hsah")


def test_user_adapter_is_wrapped():
    m = registry.load_model("tests.benchmark.test_registry:PlainAdapter")
    assert isinstance(m, UserAdapter) and isinstance(m, Adapter)
    e = m.encode_texts(["a", "b", "c"])
    assert e.dtype == np.float32 and e.shape == (3, 4)
    assert np.allclose(m.similarity(e, e), 1.0)


def test_missing_library_names_the_extra(tmp_path, monkeypatch):
    (tmp_path / "adapter_needing_lib.py").write_text("import surely_not_installed_pkg\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    registry.register_model("needs-extra", "adapter_needing_lib:Cls", extra="qwen")
    try:
        with pytest.raises(registry.RegistryError, match=r"pip install -e '\.\[qwen\]'"):
            registry.load_model("needs-extra")
    finally:
        del registry.MODELS["needs-extra"]


def test_hash_model_is_deterministic():
    a = registry.load_model("hash").encode_texts(["อาหาร", "food"])
    b = registry.load_model("hash").encode_texts(["อาหาร", "food"])
    assert np.array_equal(a, b) and not np.allclose(a[0], a[1])
    assert np.allclose(np.linalg.norm(a, axis=1), 1.0)
