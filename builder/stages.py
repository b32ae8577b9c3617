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

# What a user types to run a stage alone, where it is not ``python -m MODULE`` (the review and
# triplets stages are the ``sync`` / ``sample`` commands of their packages).
COMMANDS: dict[str, str] = {
    "annotation": "python -m annotation sync",
    "triplets": "python -m triplets sample",
}


def command(module: str) -> str:
    """The command line that runs ``module`` as a stage on its own."""
    return COMMANDS.get(module, f"python -m {module}")
