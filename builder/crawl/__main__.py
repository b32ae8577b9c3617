"""``python -m builder.crawl``."""

from builder.crawl.stage import main

raise SystemExit(main())
