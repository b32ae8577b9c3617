"""``python -m builder.tagging``."""

from builder.tagging.stage import main

raise SystemExit(main())
