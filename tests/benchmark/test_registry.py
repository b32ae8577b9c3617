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


class DotAdapter(PlainAdapter):
    """A user's adapter with its own similarity (plain dot product, not cosine)."""

    def encode_texts(self, texts):
        return np.array([[float(len(t)), 1.0] for t in texts])

    def encode_images(self, images):
        return np.array([[2.0, 0.0] for _ in images])

    def similarity(self, q, d):
        return np.asarray(q) @ np.asarray(d).T


def test_a_users_similarity_is_used_for_triplet_scores():
    m = registry.load_model("tests.benchmark.test_registry:DotAdapter")
    assert not m.uses_default_similarity()
    q = m.encode_texts(["a", "abc"])
    d = m.encode_images([None, None, None])
    s = m.indexed_pair_similarity(q, np.array([0, 1]), d, [np.array([0, 1]), np.array([2, 2])])
    assert s.tolist() == [[2.0, 2.0], [6.0, 6.0]]  # dot products, not cosines (which are < 1)
    assert m.pair_similarity(q, d[:2]).tolist() == [2.0, 6.0]


def test_indexed_cosine_equals_gathered_pairs():
    rng = np.random.default_rng(0)
    m = registry.load_model("hash")
    q, d = rng.normal(size=(5, 8)), rng.normal(size=(9, 8))
    qi, di = rng.integers(0, 5, 40), [rng.integers(0, 9, 40) for _ in range(3)]
    fast = m.indexed_pair_similarity(q, qi, d, di)
    slow = np.stack([m.pair_similarity(q[qi], d[ix]) for ix in di], axis=1)
    np.testing.assert_allclose(fast, slow, rtol=1e-5, atol=1e-6)


def test_the_zoo_is_plain_data_read_by_the_registry():
    """benchmark.zoo imports nothing of the package (no hidden registry <-> zoo cycle), and the
    registry holds exactly its tables."""
    import ast
    from pathlib import Path

    from benchmark import zoo

    tree = ast.parse(Path(zoo.__file__).read_text())
    imported = [n.module or "" for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)]
    imported += [a.name for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names]
    assert not [m for m in imported if m.startswith("benchmark")], imported
    want = {m.name: (f.target, m) for f in zoo.FAMILIES for m in f.models}
    got = registry.models()
    assert set(want) <= set(got)
    for name, (target, m) in want.items():
        e = got[name]
        assert (e.target, e.paper, e.description) == (target, m.paper, m.description), name
        assert e.kwargs.get("checkpoint") == (m.checkpoint or None)
        assert e.kwargs.get("revision") == m.revision
    assert {f.prefix for f in zoo.FAMILIES if f.prefix} <= set(registry.FAMILIES)
    assert dict(zoo.TASKS).items() <= registry.tasks().items()


def test_a_name_twice_in_the_zoo_tables_is_an_error(monkeypatch):
    from benchmark import zoo

    monkeypatch.setattr(registry, "MODELS", {})
    monkeypatch.setattr(registry, "FAMILIES", {})
    monkeypatch.setattr(registry, "TASKS", {})
    twice = [zoo.Family("a:B", "", [zoo.M("x", "c", None, "")]),
             zoo.Family("a:C", "", [zoo.M("x", "d", None, "")])]
    with pytest.raises(registry.RegistryError, match="'x' registered twice"):
        registry.register_zoo({}, twice)
    registry.register_zoo({"3xcm": "a:B"}, [])  # the first time is fine
    with pytest.raises(registry.RegistryError, match="task '3xcm' registered twice"):
        registry.register_zoo({"3xcm": "a:C"}, [])


class DeviceAdapter(Adapter):
    """A user's Adapter subclass that takes the run's device and dtype."""

    def __init__(self, device=None, dtype=None):
        from benchmark.models.base import ModelSpec

        super().__init__(ModelSpec(name="dev", family="user", checkpoint="dev"), device, dtype)


class PlainWithDevice(PlainAdapter):
    """A user's plain class with a device argument (and no dtype)."""

    def __init__(self, device="cpu"):
        self.device = device


def test_user_adapters_get_device_and_dtype_when_they_accept_them():
    m = registry.load_model("tests.benchmark.test_registry:DeviceAdapter", device="cpu",
                            dtype="bfloat16")
    assert isinstance(m, DeviceAdapter) and (m.device, m.dtype) == ("cpu", "bfloat16")
    w = registry.load_model("tests.benchmark.test_registry:PlainWithDevice", device="meta",
                            dtype="float16")
    assert isinstance(w, UserAdapter) and w.obj.device == "meta" and w.device == "meta"
    assert w.dtype != "float16"  # not accepted by the class: not passed, not recorded
    p = registry.load_model("tests.benchmark.test_registry:PlainAdapter", device="cpu")
    assert isinstance(p, UserAdapter)  # a class without the arguments is still built


def test_a_top_level_module_is_a_user_adapter(tmp_path, monkeypatch):
    (tmp_path / "my_adapter.py").write_text(
        "import numpy as np\n\n"
        "class MyModel:\n"
        "    def encode_texts(self, texts):\n"
        "        return np.ones((len(texts), 3))\n\n"
        "    def encode_images(self, images):\n"
        "        return np.ones((len(images), 3))\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    m = registry.load_model("my_adapter:MyModel")
    assert isinstance(m, UserAdapter) and m.spec.name == "my_adapter:MyModel"
    assert m.encode_texts(["a", "b"]).shape == (2, 3)
    with pytest.raises(registry.RegistryError, match="has no attribute 'Nope'"):
        registry.load_model("my_adapter:Nope")
    with pytest.raises(registry.RegistryError, match="unknown model 'no_such_module_x:Cls'"):
        registry.load_model("no_such_module_x:Cls")


@pytest.mark.parametrize("target, says", [
    ("collections:OrderedDict", "no callable encode_texts"),  # a class, not an adapter
    ("os:sep", "is a str, not an adapter class"),
    ("json:JSONDecodeError", "missing 3 required positional arguments"),  # cannot construct
])
def test_a_user_target_that_is_not_an_adapter_is_one_line_exit_2(target, says, tmp_path,
                                                                  capsys):
    from benchmark.cli import main

    assert main(["run", "--model", target, "--task", "3xcm", "--dataset",
                 "data/synthetic-3xcm", "--output-dir", str(tmp_path / "r"), "--no-cache",
                 "-q"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith(f"error: {target}") and says in err[0]
    assert not (tmp_path / "r").exists()
