"""The one place for atomic file writes and content hashes. A write goes to a temp file beside
the target, is fsynced and ``os.replace``d over it: a reader sees the old file or the new one,
never half. Shared outputs get ``0666 & ~umask`` (the default); ``private=True`` keeps 0600."""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

_CHUNK = 1 << 20


def _umask() -> int:
    # os.umask can only be read by setting it; done once per call, restored at once.
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def shared_mode() -> int:
    """The mode a plain ``open(path, "w")`` would give: ``0666 & ~umask``."""
    return 0o666 & ~_umask()


def create_shared(path: str | os.PathLike[str]) -> None:
    """Create ``path`` empty (if absent) with the mode of a plain ``open``, ``0666 & ~umask``.

    Called before ``sqlite3.connect``: SQLite creates a new database 0644 whatever the umask,
    and gives its -wal/-shm/-journal files the database's mode, so a cache a group shares
    (umask 002) is group-writable only when the database file was created here."""
    try:
        os.close(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666))
    except FileExistsError:
        pass  # an existing file keeps its mode (and may be read-only)


@contextmanager
def atomic_path(path: str | os.PathLike[str], *, private: bool = False,
                suffix: str = "") -> Iterator[Path]:
    """Yield a temp path beside ``path``; on success fsync it and move it over ``path``."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp_name = tempfile.mkstemp(prefix=f".{path.name}.", suffix=f"{suffix}.tmp",
                                    dir=path.parent)
    os.close(fd)
    tmp = Path(tmp_name)
    try:
        yield tmp
        with open(tmp, "rb+") as f:
            os.fsync(f.fileno())
        if not private:
            os.chmod(tmp, shared_mode())
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


def atomic_write_bytes(path: str | os.PathLike[str], data: bytes, *,
                       private: bool = False) -> None:
    """Write ``data`` to ``path`` atomically (temp file, fsync, ``os.replace``)."""
    with atomic_path(path, private=private) as tmp:
        tmp.write_bytes(data)


def atomic_write_text(path: str | os.PathLike[str], text: str, *,
                      private: bool = False) -> None:
    """UTF-8 text, atomically."""
    atomic_write_bytes(path, text.encode("utf-8"), private=private)


def atomic_write_json(path: str | os.PathLike[str], obj: Any, *, private: bool = False,
                      default: Callable[[Any], Any] | None = None) -> None:
    """Strict JSON (``allow_nan=False``, UTF-8, indented), atomically."""
    text = json.dumps(obj, indent=2, ensure_ascii=False, allow_nan=False, default=default)
    atomic_write_text(path, text + "\n", private=private)


def sha256_bytes(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def sha256_text(text: str) -> str:
    """Hex sha256 of a string's UTF-8 bytes."""
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def sha256_file(path: str | os.PathLike[str]) -> str:
    """Hex sha256 of a file's bytes, read in 1 MiB chunks."""
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(_CHUNK), b""):
            h.update(block)
    return h.hexdigest()


def folder_stamp(path: str | os.PathLike[str]) -> str:
    """sha256 over the relative names, sizes and modification times of every (not hidden)
    file below ``path`` (or of ``path`` itself): cheap, and changes whenever a file does."""
    path = Path(path)
    h = hashlib.sha256()
    # hidden files (.git, .cache/huggingface of `hf download`) are not data: datasets skips them
    paths = [path] if path.is_file() else sorted(
        p for p in path.rglob("*")
        if p.is_file() and not any(x.startswith(".") for x in p.relative_to(path).parts))
    for p in paths:
        st = p.stat()
        rel = p.name if p == path else p.relative_to(path).as_posix()
        h.update(f"{rel}\0{st.st_size}\0{st.st_mtime_ns}\n".encode())
    return "files:" + h.hexdigest()[:16]


# --- folders a user names -------------------------------------------------------------------
#: the marker a command leaves in a folder it wrote: its kind, a fingerprint and every file
OWNER_MARKER = ".3xcm-written.json"


class FolderNotOursError(ValueError):
    """A folder a user named holds files we did not write (and no marker of ours)."""


def read_marker(path: str | os.PathLike[str]) -> dict | None:
    """The marker of ``path`` as a dict, or None when there is none (or it is not ours)."""
    p = Path(path) / OWNER_MARKER
    try:
        obj = json.loads(p.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    if (not isinstance(obj, dict) or not isinstance(obj.get("files"), dict)
            or not isinstance(obj.get("kind"), str)):
        return None
    return obj


def may_write_into(path: str | os.PathLike[str], kind: str) -> dict | None:
    """May we write into ``path``? Yes when it is absent or empty (returns None) or holds our
    marker of ``kind`` (returns it); otherwise :class:`FolderNotOursError`."""
    path = Path(path)
    if not path.exists():
        return None
    if not path.is_dir():
        raise FolderNotOursError(f"{path} exists and is not a folder; refusing to write there")
    marker = read_marker(path)
    if marker is not None and marker["kind"] == kind:
        return marker
    if any(path.iterdir()):
        raise FolderNotOursError(
            f"{path} is not empty and holds no {OWNER_MARKER} of a {kind} we wrote; "
            "refusing to write there (name an empty or new folder)")
    return None


def claim(path: str | os.PathLike[str], kind: str) -> Path:
    """Claim ``path`` for a command of ``kind`` that writes files into it one by one (results,
    reproduce): :func:`may_write_into`, then create it and leave our (empty) marker at once, so
    that the next run, or a process started beside this one, finds the folder ours."""
    path = Path(path)
    if may_write_into(path, kind) is None:
        path.mkdir(parents=True, exist_ok=True)
        if read_marker(path) is None:
            _write_marker(path, kind, {})
    return path


def _manifest(folder: Path) -> dict[str, str]:
    return {p.relative_to(folder).as_posix(): sha256_file(p)
            for p in sorted(folder.rglob("*")) if p.is_file() and p.name != OWNER_MARKER}


def _write_marker(folder: Path, kind: str, files: dict[str, str]) -> str:
    fingerprint = "sha256:" + sha256_text(json.dumps(files, sort_keys=True))
    atomic_write_json(folder / OWNER_MARKER, {"kind": kind, "fingerprint": fingerprint,
                                              "files": files})
    return fingerprint


def inside(folder: Path, rel: str) -> Path | None:
    """``folder/rel`` when ``rel`` names a path inside ``folder`` reached through real folders
    only (no ``..``, not absolute, no symlinked folder on the way); None otherwise."""
    parts = Path(rel).parts
    if not parts or Path(rel).is_absolute() or ".." in parts:
        return None
    for i in range(1, len(parts)):
        if folder.joinpath(*parts[:i]).is_symlink():
            return None
    return folder.joinpath(*parts)


def install_folder(tmp: str | os.PathLike[str], out: str | os.PathLike[str], kind: str) -> str:
    """Put the files written in ``tmp`` at ``out`` and return their fingerprint. A new or empty
    ``out`` is swapped in whole (with the umask's folder mode, not ``mkdtemp``'s 0700); one
    with our marker of ``kind`` is updated in place: our previous files are replaced, those we
    no longer write removed only when they still hold the bytes we wrote and lie inside
    ``out`` through real folders; every file we did not write is left untouched."""
    tmp, out = Path(tmp), Path(out)
    if out.is_symlink():
        raise FolderNotOursError(f"{out} is a symlink; name the folder it points to")
    old = may_write_into(out, kind)
    files = _manifest(tmp)
    os.chmod(tmp, 0o777 & ~_umask())
    if old is None:
        fingerprint = _write_marker(tmp, kind, files)
        if out.exists():
            out.rmdir()  # may_write_into saw it empty
        tmp.rename(out)
        return fingerprint
    through = next((rel for rel in files if inside(out, rel) is None), None)
    if through is not None:
        raise FolderNotOursError(f"{out / through}: a folder on the way is a symlink; "
                                 "refusing to write through it")
    # first claim the union, so that an interrupted update leaves nothing orphaned
    _write_marker(out, kind, {**old["files"], **files})
    for rel in files:
        dest = out / rel
        dest.parent.mkdir(parents=True, exist_ok=True)
        os.replace(tmp / rel, dest)
    for rel in sorted(set(old["files"]) - set(files)):
        gone = inside(out, rel)
        if (gone is None or gone.is_symlink() or not gone.is_file()
                or sha256_file(gone) != old["files"][rel]):
            continue  # not provably the file we wrote there
        gone.unlink()
        for parent in gone.parents:
            if parent == out or parent.is_symlink() or any(parent.iterdir()):
                break
            parent.rmdir()
    fingerprint = _write_marker(out, kind, files)
    import shutil

    shutil.rmtree(tmp, ignore_errors=True)
    return fingerprint


def mark_folder(path: str | os.PathLike[str], kind: str,
                written: Iterable[str | os.PathLike[str]]) -> str:
    """Add the files a ``kind`` command wrote in ``path`` to its marker; returns the fingerprint."""
    path = Path(path)
    old = read_marker(path)
    files = dict(old["files"]) if old is not None and old["kind"] == kind else {}
    root = path.resolve()
    for p in map(Path, written):
        if p.is_file() and p.resolve().is_relative_to(root):  # never a file outside ``path``
            files[p.resolve().relative_to(root).as_posix()] = sha256_file(p)
    return _write_marker(path, kind, files)
