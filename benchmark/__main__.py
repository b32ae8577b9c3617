from __future__ import annotations

import sys

from benchmark.cli import main

sys.exit(main())
