"""``python -m pipeline export TABLE --out FILE``: one catalog table or view as CSV or parquet."""

from __future__ import annotations

import csv
import io
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

from builder.catalog import Catalog
from builder.stagekit import StageInputError
from core.files import atomic_write_text


def write_csv(path: str | Path, header: Sequence[str], rows: Iterable[Sequence[Any]]) -> None:
    """``header`` and ``rows`` as a CSV file, written atomically (an export: the user's umask)."""
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(header)
    w.writerows(rows)
    atomic_write_text(Path(path), buf.getvalue())


def export_table(catalog: Catalog, table: str, out: str | Path) -> int:
    """Write one catalog table or view to CSV or parquet (by extension); returns the row count.
    ``T`` is the view ``T_export`` where there is one, ``T:raw`` the bare table."""
    import pandas as pd

    from core.files import atomic_path

    names = catalog.tables() + catalog.views()
    if table.endswith(":raw"):
        table = table[: -len(":raw")]
    elif f"{table}_export" in catalog.views():
        table = f"{table}_export"
    if table not in names:
        raise StageInputError(f"unknown table {table!r} (tables: {', '.join(names)})")
    out = Path(out)
    suffix = out.suffix.lower()
    if suffix not in (".csv", ".parquet"):
        raise StageInputError(f"--out must end in .csv or .parquet, got {out.name!r}")
    df = pd.read_sql_query(f'SELECT * FROM "{table}"', catalog.con)
    with atomic_path(out, suffix=suffix) as tmp:  # an export: the user's umask
        if suffix == ".csv":
            df.to_csv(tmp, index=False)
        else:
            df.to_parquet(tmp, index=False)
    return len(df)
