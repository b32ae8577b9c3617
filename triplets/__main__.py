"""``python -m triplets``: see :mod:`triplets.cli`."""

from __future__ import annotations

import sys

from triplets.cli import main

if __name__ == "__main__":
    sys.exit(main())
