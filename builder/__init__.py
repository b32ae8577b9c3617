"""3XCM builder: staged construction of the image pool, one module per stage.

Stages (run in this order by ``python -m builder run``) live in ``builder.stages.STAGES``.
The work dir's ``catalog.sqlite`` is the single source of truth (see ``builder.catalog``).
"""

from __future__ import annotations

__version__ = "0.1.0"
