"""The stages of a build, in the order ``python -m builder run`` runs them.

Each entry is (stage name, module); every module has ``main(argv=None) -> int`` over a library
function (the builder's own stages through ``builder.stagekit.stage_main``; ``review`` and
``triplets`` are the entry points of the ``annotation`` and ``triplets`` packages). A stage
never calls another stage; the runner calls them in order.
"""

from __future__ import annotations

STAGES: list[tuple[str, str]] = [
    ("concepts", "builder.concepts"),
    ("concept_dedup", "builder.concept_dedup"),
    ("queries", "builder.queries"),
    ("crawl", "builder.crawl"),
    ("image_dedup", "builder.image_dedup"),
    ("review", "annotation"),
    ("tagging", "builder.tagging"),
    ("triplets", "triplets"),
]
