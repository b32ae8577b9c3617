"""``python -m builder.demo``: an alias of ``python -m pipeline.demo`` (same flags).

The demo runs every stage of the pipeline, so it belongs to the ``pipeline`` package above the
stages; this entry script is kept for users who type the old name.
"""

from __future__ import annotations

import sys

from pipeline.demo import main as demo_main


def main(argv: list[str] | None = None) -> int:
    """``python -m pipeline.demo`` under the name ``python -m builder.demo``."""
    return demo_main(argv, prog="python -m builder.demo")


if __name__ == "__main__":
    sys.exit(main())
