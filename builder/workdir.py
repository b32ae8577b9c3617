"""The build's work dir: ``catalog.sqlite``, content-addressed ``images/ab/<sha256>.<ext>``
(written atomically), ``cache/llm.sqlite``, ``exports/`` (docs/builder.md)."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from core.files import atomic_write_bytes, sha256_bytes

DEFAULT_WORKDIR = "./xcm-work"


def resolve_workdir(path: str | os.PathLike[str] | None = None) -> Path:
    """``--workdir`` if given, else ``$XCM_WORKDIR``, else ``./xcm-work``."""
    return Path(path or os.environ.get("XCM_WORKDIR") or DEFAULT_WORKDIR).expanduser()


def _under(*parts: str) -> property:
    """A read-only path below the work dir's root."""
    return property(lambda wd: wd.root.joinpath(*parts))


@dataclass(frozen=True)
class WorkDir:
    """Paths of one build's work dir; ``open()`` creates the folders."""

    root: Path
    catalog_path = _under("catalog.sqlite")
    images_dir = _under("images")
    cache_dir = _under("cache")
    llm_cache_path = _under("cache", "llm.sqlite")
    exports_dir = _under("exports")

    @classmethod
    def open(cls, path: str | os.PathLike[str] | None = None) -> WorkDir:
        wd = cls(resolve_workdir(path))
        for p in (wd.root, wd.images_dir, wd.cache_dir, wd.exports_dir):
            p.mkdir(parents=True, exist_ok=True)
        return wd

    def image_path(self, sha256: str, ext: str) -> Path:
        """``images/<sha[:2]>/<sha>.<ext>``: the name never comes from a URL."""
        return self.images_dir / sha256[:2] / f"{sha256}.{ext.lstrip('.').lower()}"

    def store_image_bytes(self, data: bytes, ext: str) -> tuple[str, Path]:
        """Store bytes content-addressed (atomically, once, 0600); return (sha256, path)."""
        sha = sha256_bytes(data)
        path = self.image_path(sha, ext)
        if not path.exists():
            atomic_write_bytes(path, data, private=True)
        return sha, path
