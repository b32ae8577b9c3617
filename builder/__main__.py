"""``python -m builder``: an alias of ``python -m pipeline`` (status, export, run).

The stage list and the runner belong to the ``pipeline`` package, above the builder, the
annotation and the triplets packages; this entry script is the only builder module that
imports it (nothing else in ``builder`` does).
"""

from __future__ import annotations

import sys

from pipeline.cli import main as pipeline_main


def main(argv: list[str] | None = None) -> int:
    """``python -m pipeline`` under the name ``python -m builder``."""
    return pipeline_main(argv, prog="python -m builder")


if __name__ == "__main__":
    sys.exit(main())
