"""The 3XCM pipeline: the stage list above the builder, annotation and triplets packages.

``python -m pipeline [status|export|run]`` (``python -m builder`` is an alias): the stages in
order (:mod:`pipeline.stages`), the runner (:mod:`pipeline.run`) and the offline demo
(:mod:`pipeline.demo`, ``python -m pipeline.demo``; ``python -m builder.demo`` is an alias).
Nothing in ``builder``, ``annotation``, ``triplets`` or ``benchmark`` imports this package.
"""

from __future__ import annotations
