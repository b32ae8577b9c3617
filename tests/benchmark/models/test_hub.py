"""Checkpoint resolution: Hugging Face cache layout, $XCM_WEIGHTS_DIR, local folders, offline."""

from __future__ import annotations

import time

import pytest

from benchmark.models import hub

COMMIT = "0123456789abcdef0123456789abcdef01234567"


@pytest.fixture()
def hf_cache(tmp_path, monkeypatch):
    """A Hugging Face hub cache holding org/tiny at COMMIT (refs/main -> COMMIT)."""
    cache = tmp_path / "hub"
    repo = cache / "models--org--tiny"
    snap = repo / "snapshots" / COMMIT
    snap.mkdir(parents=True)
    (snap / "config.json").write_text("{}")
    (repo / "refs").mkdir()
    (repo / "refs" / "main").write_text(COMMIT)
    monkeypatch.setenv("HF_HUB_CACHE", str(cache))
    monkeypatch.setattr("huggingface_hub.constants.HF_HUB_CACHE", str(cache))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    return snap


def test_cache_snapshot_and_its_commit(hf_cache):
    p = hub.resolve_repo("org/tiny", None, what="t")
    assert p == hf_cache
    assert hub.effective_revision("org/tiny", None, p) == COMMIT
    assert hub.resolve_repo("org/tiny", COMMIT, what="t") == hf_cache
    assert hub.resolve_file("org/tiny", "config.json", None, what="t") == hf_cache / "config.json"


def test_missing_revision_fails_fast_offline(hf_cache):
    t0 = time.perf_counter()
    with pytest.raises(hub.CheckpointNotFound, match="org/tiny@fedcba") as e:
        hub.resolve_repo("org/tiny", "fedcba" + COMMIT[6:], what="t")
    assert time.perf_counter() - t0 < 2
    assert str(hf_cache.parents[2]) in str(e.value)


def test_weights_dir_wins_and_local_folders(tmp_path, monkeypatch, hf_cache):
    wd = tmp_path / "weights"
    (wd / "org" / "tiny").mkdir(parents=True)
    (wd / "org" / "tiny" / "model.safetensors").write_bytes(b"x")
    monkeypatch.setenv(hub.WEIGHTS_ENV, str(wd))
    p = hub.resolve_repo("org/tiny", None, what="t")
    assert p == wd / "org" / "tiny"
    rev = hub.effective_revision("org/tiny", None, p)
    assert rev.startswith("sha256:") and rev == hub.effective_revision("org/tiny", None, p)
    assert hub.effective_revision("org/tiny", "v1", p) == "v1"
    # a local folder given directly, with or without the local-dir: prefix
    assert hub.resolve_repo(f"local-dir:{p}", None, what="t") == p
    assert hub.resolve_repo(str(p), None, what="t") == p
    with pytest.raises(hub.CheckpointNotFound, match="does not exist"):
        hub.resolve_repo(str(tmp_path / "nope"), None, what="t")


def test_fingerprint_follows_content(tmp_path):
    d = tmp_path / "m"
    d.mkdir()
    (d / "model.safetensors").write_bytes(b"a")
    a = hub.folder_fingerprint(d)
    (d / "model.safetensors").write_bytes(b"b")
    assert hub.folder_fingerprint(d) != a


def closed_port() -> int:
    """A 127.0.0.1 port nothing listens on (bound, then closed)."""
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture()
def hub_down(monkeypatch, tmp_path):
    """Online mode with the hub pointed at a closed 127.0.0.1 port, and an empty cache."""
    from core.hub import hub_unreachable

    for var in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE"):
        monkeypatch.setenv(var, "0")
    monkeypatch.setattr("huggingface_hub.constants.HF_HUB_OFFLINE", False)
    monkeypatch.setattr("huggingface_hub.constants.ENDPOINT", f"http://127.0.0.1:{closed_port()}")
    monkeypatch.setattr("huggingface_hub.constants.HF_HUB_CACHE", str(tmp_path / "empty"))
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "empty"))
    hub_unreachable.cache_clear()
    yield
    hub_unreachable.cache_clear()


@pytest.mark.parametrize("fault", ["refused", "no DNS"])
def test_an_unreachable_hub_fails_in_seconds_with_the_fix(hub_down, monkeypatch, fault):
    """No retries against a hub that cannot be reached: the local cache, then one line
    naming XCM_WEIGHTS_DIR and HF_HUB_OFFLINE=1 (the hub client's retries took ~25 s)."""
    import socket

    if fault == "no DNS":
        def no_dns(*a, **kw):
            raise socket.gaierror(socket.EAI_NONAME, "Name or service not known")

        monkeypatch.setattr(socket, "getaddrinfo", no_dns)
    for resolve in (lambda: hub.resolve_repo("org/absent", None, what="model m"),
                    lambda: hub.resolve_file("org/absent", "w.bin", None, what="model m")):
        t0 = time.perf_counter()
        with pytest.raises(hub.CheckpointNotFound) as e:
            resolve()
        assert time.perf_counter() - t0 < 3
        msg = str(e.value)
        assert "the hub cannot be reached" in msg and ("does not resolve" if fault == "no DNS"
                                                       else "cannot be reached (") in msg
        assert "HF_HUB_OFFLINE=1" in msg and f"set {hub.WEIGHTS_ENV}=WEIGHTS" in msg
        assert "\n" not in msg


def test_an_unreachable_hub_dataset_is_one_line_in_seconds(hub_down):
    from core import hub as core_hub
    from core.errors import DataError

    t0 = time.perf_counter()
    with pytest.raises(DataError) as e:
        core_hub.config_names("org/absent-data")
    assert time.perf_counter() - t0 < 3
    assert "the hub cannot be reached" in str(e.value) and "HF_HUB_OFFLINE=1" in str(e.value)
