"""The stages of a build, in the order ``python -m builder run`` runs them.

Each entry is (stage name, module); every module has ``main(argv=None) -> int`` and a library
function it wraps. A stage never calls another stage; the runner calls them in order.
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
