"""``python -m builder.tagging``."""

import sys

from builder.tagging.stage import main

sys.exit(main())
