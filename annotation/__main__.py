"""``python -m annotation``: see :mod:`annotation.cli`."""

from __future__ import annotations

import sys

from annotation.cli import main

if __name__ == "__main__":
    sys.exit(main())
