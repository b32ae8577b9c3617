"""``datasets`` access shared by the readers: configs of a folder or hub id, one split, image
bytes (undecoded, on demand). Failures are one :class:`~core.errors.DataError` line; an
unreachable hub means the local cache only."""

from __future__ import annotations

import functools
import hashlib
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

from core import net
from core.errors import DataError
from core.files import folder_stamp

OFFLINE_HINT = "offline use: HF_HUB_OFFLINE=1, docs/offline.md"


@functools.cache
def hub_unreachable() -> str | None:
    """Why the hub cannot be reached (None: it can, or ``HF_HUB_OFFLINE=1``), probed once."""
    if os.environ.get("HF_HUB_OFFLINE", "").strip().lower() in ("1", "true", "yes", "on"):
        return None
    from huggingface_hub import constants

    return net.unreachable(constants.ENDPOINT)


def local_only_if_unreachable(path_or_id: str) -> str:
    """For a hub id when the hub cannot be reached: read the local cache only, and return the
    words for an error line ("" otherwise)."""
    why = None if Path(path_or_id).exists() else hub_unreachable()
    if why is None:
        return ""
    import datasets
    from huggingface_hub import constants

    constants.HF_HUB_OFFLINE = datasets.config.HF_HUB_OFFLINE = True
    return f" (the hub cannot be reached: {why}; looked in the local cache only; {OFFLINE_HINT})"


class EmptySplit(DataError):
    """The split has a schema and no rows (``datasets`` refuses to load it)."""


def check_spec(path_or_id: str, flag: str = "--dataset") -> None:
    """A local folder or a hub id ``ORG/NAME``."""
    if not Path(path_or_id).exists() and path_or_id.count("/") != 1:
        raise DataError(f"{flag}: {path_or_id!r} is neither a folder nor a hub id ORG/NAME")


def one_line(e: Exception) -> str:
    """``Type: first line of the message`` (every loader failure is one line)."""
    text = str(e).strip()
    return f"{type(e).__name__}: {text.splitlines()[0] if text else ''}".rstrip(": ")


def cache_kwargs(path_or_id: str) -> dict[str, str]:
    """``cache_dir`` for ``load_dataset`` of a local folder, keyed by its path and its files'
    names, sizes and times (``datasets`` keys it by base name only, so ``a/rel`` and ``b/rel``,
    or a changed folder, would get the first cached table)."""
    p = Path(path_or_id)
    if not p.exists():
        return {}
    import datasets

    key = hashlib.sha256(f"{p.resolve()}\0{folder_stamp(p)}".encode()).hexdigest()[:20]
    return {"cache_dir": str(Path(datasets.config.HF_DATASETS_CACHE) / "xcm3-local" / key)}


def config_names(path_or_id: str, revision: str | None = None) -> list[str]:
    """The dataset's configs (``["default"]`` for a plain folder of data files)."""
    import datasets

    check_spec(path_or_id)
    offline = local_only_if_unreachable(path_or_id)
    try:
        return list(datasets.get_dataset_config_names(path_or_id, revision=revision))
    except Exception as e:  # noqa: BLE001 - any loader failure is one clear line
        raise DataError(f"--dataset {path_or_id}: cannot read its configs: {one_line(e)}"
                        f"{offline}") from e


def load_split(path_or_id: str, config: str | None, split: str | None,
               revision: str | None = None) -> Any:
    """One split of one config (``split=None``: the only split, whatever its name)."""
    import datasets

    what = f"{path_or_id}" + (f" config {config!r}" if config else "")
    offline = local_only_if_unreachable(path_or_id)
    try:
        ds = datasets.load_dataset(path_or_id, config, split=split, revision=revision,
                                   **cache_kwargs(path_or_id))
    except Exception as e:  # noqa: BLE001 - any loader failure is one clear line
        if isinstance(e, ValueError) and "corresponds to no data" in str(e):
            raise EmptySplit(f"--dataset {what}: no rows") from e
        raise DataError(f"--dataset {what}: cannot load: {one_line(e)}{offline}") from e
    if split is None:
        if len(ds) != 1:
            raise DataError(f"--dataset {what}: expected one split, found {sorted(ds)}")
        ds = next(iter(ds.values()))
    return ds


def image_bytes_reader(ds: Any, id_column: str, what: str, embedded_only: bool = False,
                       ) -> tuple[list[str], Callable[[str], bytes]]:
    """(image ids in row order, ``id -> bytes``) of a split's undecoded ``image`` column
    (embedded bytes, or unless ``embedded_only`` a local path)."""
    import datasets

    ds = ds.select_columns([id_column, "image"]).cast_column("image", datasets.Image(decode=False))
    table = ds.data  # pyarrow, memory-mapped
    ids = [str(x) for x in table.column(id_column).to_pylist()]
    row = {iid: i for i, iid in reversed(list(enumerate(ids)))}
    col = table.column("image")

    def read(iid: str) -> bytes:
        cell = col[row[iid]].as_py() or {}
        if cell.get("bytes"):
            return cell["bytes"]
        if not embedded_only and cell.get("path") and Path(cell["path"]).is_file():
            return Path(cell["path"]).read_bytes()
        raise DataError(f"{what}: image {iid} has no embedded bytes"
                        + ("" if embedded_only else " and no readable path"))

    return ids, read
