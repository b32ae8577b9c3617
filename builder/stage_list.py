"""The stages of a build in order: the one list ``python -m builder --help`` shows and
``pipeline.stages`` runs (named here, imported there: some are packages above the builder)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class StageInfo:
    name: str  # in the catalog's run records
    module: str  # has ``main(argv=None) -> int``
    summary: str
    command: str = ""  # what a user types to run it alone; default ``python -m MODULE``

    @property
    def command_line(self) -> str:
        return self.command or f"python -m {self.module.removesuffix('.stage')}"


STAGES: tuple[StageInfo, ...] = (
    StageInfo("concepts", "builder.concepts", "concepts per country (LLM, curated list)"),
    StageInfo("concept_dedup", "builder.concept_dedup", "merge near-synonymous concepts"),
    StageInfo("queries", "builder.queries", "one text query per concept and country"),
    StageInfo("crawl", "builder.crawl.stage", "image search and download"),
    StageInfo("image_dedup", "builder.image_dedup", "near-duplicate groups per concept"),
    StageInfo("review", "annotation", "human review in Label Studio",
              "python -m annotation sync"),
    StageInfo("tagging", "builder.tagging.stage", "the concepts each image shows (LLM)"),
    StageInfo("triplets", "triplets", "seeded triplet sampling", "python -m triplets sample"),
)
