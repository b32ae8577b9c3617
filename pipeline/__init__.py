"""The 3XCM pipeline: the stage list above the builder, annotation and triplets packages.

``python -m pipeline [status|export|run]``: the stages in order (:mod:`pipeline.stages`), the
runner (:mod:`pipeline.run`) and the offline demo (``python -m pipeline.demo``).
Nothing in ``builder``, ``annotation``, ``triplets`` or ``benchmark`` imports this package.
"""

from __future__ import annotations
