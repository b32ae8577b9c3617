"""3XCM builder: staged construction of the image pool, one module per stage.

The stage list and its runner are ``pipeline.stages.STAGES`` and ``python -m pipeline run``
(``python -m builder run`` is an alias).
The work dir's ``catalog.sqlite`` is the single source of truth (see ``builder.catalog``).
"""

from __future__ import annotations

__version__ = "0.1.0"
