"""``python -m builder.crawl``."""

import sys

from builder.crawl.stage import main

sys.exit(main())
