"""Every registered model and task, in one place (names -> lazily imported classes).

Model entries pin their checkpoint and revision. Sections are kept apart so that work on one
model family does not touch another's lines.
"""

from __future__ import annotations

from benchmark.registry import register_family, register_model, register_task

# -- tasks -------------------------------------------------------------------------------------
register_task("3xcm", "benchmark.tasks.xcm:XCMTextToImage")
register_task("3xcm-i2i", "benchmark.tasks.xcm:XCMImageToImage")
register_task("xm3600-i2t", "benchmark.tasks.xm3600:XM3600ImageToText")
register_task("3xcm-matrix", "benchmark.tasks.matrix:XCMMatrix")

# -- test / demo models ------------------------------------------------------------------------
register_model(
    "hash", "benchmark.models.hash:HashModel",
    description="deterministic fake: vectors seeded by the sha256 of each input (tests, demos)",
)

# -- open_clip family --------------------------------------------------------------------------
register_family("open_clip", "benchmark.models.openclip:OpenCLIPModel", extra="openclip")
register_model(
    "clip-l14", "benchmark.models.openclip:OpenCLIPModel", extra="openclip", paper=True,
    description="OpenAI CLIP ViT-L/14 (paper: clip-vit-large-patch14)",
    checkpoint="ViT-L-14/openai",
    # open_clip's 'openai' tag resolves to timm/vit_large_patch14_clip_224.openai on the hub.
    revision="open_clip:ViT-L-14/openai",
)
