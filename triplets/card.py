"""The release's dataset card: YAML front matter (``configs``, ``dataset_info``) and the text,
ending with the repository's ``DATASHEET.md``, whose numbers refer to this card.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from core import datatables
from core.release import LICENSE_FILE, SPLITS, configs_yaml

DATASHEET = Path(__file__).resolve().parent.parent / "DATASHEET.md"
IMAGE_COLUMN_DOCS = {
    "image_id": "release id: `<country>-<concept slug>-<sha256[:12]>`",
    "image": "the image, original bytes embedded (decoded by `datasets` as a PIL image)",
    "concept": "the concept whose query found the image",
    "country": "ISO 3166-1 alpha-3 of the country whose query found the image",
    "query_language": "BCP-47 of the query that found it (English or the native language)",
    "search_query": "the search query that found it",
    "search_rank": "raw 1-based rank in the search results",
    "source_url": "the image's URL",
    "page_url": "the page the image was found on (may be empty)",
    "title": "the search result's title (may be empty)",
    "tags": "every concept the image shows, priority order (empty: untagged)",
    "sha256": "sha256 of the embedded bytes",
    "width": "pixels, of the upright picture (EXIF orientation applied)",
    "height": "pixels, of the upright picture (EXIF orientation applied)",
}
TRIPLET_COLUMN_DOCS = {
    "triplet_id": "`<query_image_id>-t<round>`",
    "query_image_id": "the anchor image of the query's concept and country",
    "query_concept": "the query concept (English name)",
    "query_country": "the query country (ISO alpha-3)",
    "query_language": "BCP-47 of the query country's native language",
    "query_text": "the concept as people of the query country write it: the text query",
    "semantic_image_id": "same concept, another country",
    "semantic_country": "its country",
    "cultural_image_id": "same country, another concept, not tagged with the query concept",
    "cultural_concept": "its concept",
    "non_relevant_image_id": "another concept and country, not tagged with the query concept",
    "non_relevant_concept": "its concept",
    "non_relevant_country": "its country",
    "query_locale": "BCP-47 with region of the query text (pt-PT for Portugal, pt-BR for Brazil)",
    "query_term_source": "where the query text came from: reviewed (by native speakers), "
                         "authors, generated, ... (data/queries.csv); unmatched: the term "
                         "changed after sampling; concept label: an English country's label",
    "query_term_reviewers": "how many native speakers reviewed the query text (0: none)",
}


#: The Hub's size categories (its dataset card spec), smallest first: (upper bound, label).
SIZE_CATEGORIES = ((1_000, "n<1K"), (10_000, "1K<n<10K"), (100_000, "10K<n<100K"),
                   (1_000_000, "100K<n<1M"), (10_000_000, "1M<n<10M"),
                   (100_000_000, "10M<n<100M"), (1_000_000_000, "100M<n<1B"),
                   (10_000_000_000, "1B<n<10B"), (100_000_000_000, "10B<n<100B"),
                   (1_000_000_000_000, "100B<n<1T"))
#: The release's Croissant metadata (written by :mod:`triplets.croissant`, linked from the card).
CROISSANT_FILE = "croissant.json"
#: The Hub's task categories (huggingface.js ``PIPELINE_DATA``) that fit: the Hub has no
#: text-to-image *retrieval* category; ``text-to-image`` and ``image-feature-extraction`` are
#: where image-text retrieval datasets are listed, and the tags say retrieval.
TASK_CATEGORIES = ["text-to-image", "image-feature-extraction"]
LICENCE_TERMS = [
    "The triplets, tags and metadata (everything but the images) are released under the MIT "
    "licence of the toolkit.",
    "The images were found by web image search and remain under their owners' copyright and "
    "licences; they are redistributed only to evaluate retrieval models, for non-commercial "
    "research. Each image's `source_url` and `page_url` name its origin; `provenance.jsonl` "
    "holds the full record (query, search backend and region, raw rank, HTTP status, content "
    "type, size, retrieval time, dedup and review outcome, tagging model and prompt hash). "
    "Pages that sent `X-Robots-Tag: noai`/`noimageai` were not used.",
    "Takedown: an owner who objects to an image's inclusion can ask for its removal (open an "
    "issue on the dataset repository citing the `image_id`); it is removed in the next release.",
]


def size_category(n: int) -> str:
    """The Hub's size category of ``n`` rows (``n>1T`` past the last bound)."""
    return next((label for bound, label in SIZE_CATEGORIES if n < bound), "n>1T")


def licence_text() -> str:
    """``LICENSE.md`` of the release, the target of the card's ``license_link``."""
    return ("# 3XCM licence (`3xcm-mixed`)\n\n"
            + "\n".join(f"- {t}" for t in LICENCE_TERMS) + "\n")


def release_languages() -> list[str]:
    """The release's languages (ISO 639 codes of the countries' languages)."""
    return sorted({c.language.split("-")[0] for c in datatables.countries()})


def front_matter(features: dict[str, Any], splits: dict[str, dict[str, int]], n_triplets: int) -> dict:
    """The card's YAML metadata: licence, categories, ``configs`` and ``dataset_info``."""
    rows = max([n_triplets, *(s.get("num_examples", 0) for s in splits.values())])
    return {
        "pretty_name": "3XCM",
        "license": "other",
        "license_name": "3xcm-mixed",
        "license_link": LICENSE_FILE,
        "language": release_languages(),
        "multilinguality": "multilingual",
        "task_categories": TASK_CATEGORIES,
        "size_categories": [size_category(rows)],
        "tags": ["cross-modal-retrieval", "text-to-image-retrieval", "bias", "multilingual",
                 "multicultural", "benchmark"],
        "configs": configs_yaml(),
        "dataset_info": [{"config_name": name, "features": features[name],
                          "splits": [{"name": SPLITS[name], **splits[name]}]}
                         for name in ("triplets", "images")],
    }


def _table(header: list[str], rows: list[list[Any]]) -> str:
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(str(x) for x in r) + " |" for r in rows]
    return "\n".join(lines)


def numbers_markdown(n: dict[str, Any]) -> str:
    """The card's "Numbers of this build" section (also quoted by the datasheet)."""
    labels = {c.code: c.name for c in datatables.countries()}
    tags = n["tags"]
    s = n["sampling"]
    parts = [
        f"- {n['triplets']} triplets over {n['countries']} countries and {n['concepts']} concepts; "
        f"{n['images']} released images, {n['images_in_triplets']} of them in triplets.",
        f"- Sampling: seed {s['seed']}, {s['per_image']} triplet(s) per kept image, "
        f"distinct-language semantic candidates {'on' if s['distinct_language'] else 'off'}"
        + (f"; semantic and non-relevant candidates only from {', '.join(s['candidate_countries'])}"
           f" (a controlled design)" if s.get("candidate_countries") else "") + ".",
        f"- Tags: {tags['tagged_images']} tagged images, {tags['mean_tags_per_tagged_image']} tags "
        f"per tagged image on average, {tags['share_with_several_tags']:.1%} with several tags, "
        f"{tags['share_tags_include_crawl_concept']:.1%} include their crawl concept "
        f"({tags['share_first_tag_is_crawl_concept']:.1%} as first tag); states "
        f"{tags['images_by_tag_state']}; model(s) {tags['models'] or ['-']}.",
        f"- Crawl outcomes per occurrence (items): {n['items_by_status']}; searches "
        f"{n['searches_by_status']}; downloads {n['downloads_by_status']}.",
        f"- Near-duplicate groups: {n['dedup_groups_by_status']}; human reviews: "
        f"{n['reviews'] or 'none'}.",
        f"- Concepts: {n['concepts_by_status'] or 'from data/concepts.txt'}; images whose bytes "
        f"occur in several (concept, country) cells: {n['same_bytes_in_several_cells']}.",
        "",
        _table(["country", "name", "images", "triplets"],
               [[k, labels.get(k, k), v, n["triplets_by_country"].get(k, 0)]
                for k, v in n["images_by_country"].items()]),
        "",
        "<details><summary>per concept</summary>",
        "",
        _table(["concept", "images", "triplets"],
               [[c, v, n["triplets_by_concept"].get(c, 0)] for c, v in n["images_by_concept"].items()]),
        "",
        "</details>",
    ]
    return "\n".join(parts)


def card_text(meta: dict, numbers: dict[str, Any], build: dict[str, Any]) -> str:
    """The whole README.md."""
    import yaml

    body = [
        "# 3XCM: Cross-Cultural, Cross-lingual, Cross-Modal retrieval triplets",
        "",
        "3XCM measures *association bias* of multimodal retrievers: a query is a concept written "
        "in the native language of a country; the retriever must pick one of three images: "
        "**semantic** (same concept, another country), **cultural** (same country, another "
        "concept) or **non-relevant** (another concept, another country). Win rates "
        "`M_sem`, `M_cul`, `M_non`; `SP = M_cul / M_sem` (lower is better).",
        "",
        "## Loading",
        "",
        "```python",
        "from datasets import load_dataset",
        'triplets = load_dataset(PATH, "triplets", split="test")',
        'images = load_dataset(PATH, "images", split="train")  # image bytes embedded',
        "```",
        "",
        "Score a retriever: `python -m benchmark run --model NAME --task 3xcm --dataset PATH`.",
        "",
        "## Configs and columns",
        "",
        "`images` (split `train`; one row per kept image of a concept and country):",
        "",
        _table(["column", "meaning"], [[f"`{k}`", v] for k, v in IMAGE_COLUMN_DOCS.items()]),
        "",
        "`triplets` (split `test`):",
        "",
        _table(["column", "meaning"], [[f"`{k}`", v] for k, v in TRIPLET_COLUMN_DOCS.items()]),
        "",
        "## Sampling rules",
        "",
        "Every kept image anchors a triplet. Semantic: same concept, another country "
        "(another language too when distinct-language is on). Cultural: same country, another "
        "concept. Non-relevant: another concept and country. The query concept is never among "
        "the tags of the cultural or the non-relevant image, and untagged images are never "
        "candidates. Candidates are drawn without reuse where the pool allows, spread over "
        "countries and concepts; sampling is seeded. `python -m triplets validate --release "
        "PATH` checks every rule.",
        "",
        "## Images and texts",
        "",
        "Image bytes are the crawled originals, unchanged. The evaluator, image dedup and the "
        "tagger decode them with one decoder (`core/decode.py`): the EXIF "
        "orientation is applied (`width` and `height` are the upright picture's, as a browser "
        "shows it), 16-bit grey is scaled by 1/257, transparency is composited over white, "
        "every other mode is converted to RGB; files over 64 MiB, 0x0 images and images over "
        "178,956,970 pixels are refused. `datasets` decodes the `image` column without "
        "applying the EXIF orientation: `PIL.ImageOps.exif_transpose(img)` gives the picture "
        "that was scored. Every concept name, query text and tag is Unicode NFC.",
        "",
        "## Numbers of this build",
        "",
        numbers_markdown(numbers),
        "",
        "## Licence and provenance",
        "",
        *(f"- {t}" for t in LICENCE_TERMS),
        f"- The same terms are in [`{LICENSE_FILE}`]({LICENSE_FILE}) (the card's `license_link`).",
        "",
        "## Files",
        "",
        "- `triplets/`, `images/`: parquet shards of the two configs.",
        f"- `build.json`: the seed ({build['sampling']['seed']}), the sampling settings, every "
        "stage run of the build (parameters, counts, times) and the numbers above.",
        "- `provenance.jsonl`: one record per released image.",
        f"- `{LICENSE_FILE}`: the licence terms above.",
        f"- [`{CROISSANT_FILE}`]({CROISSANT_FILE}): Croissant 1.1 metadata (JSON-LD) of both "
        "configs with the responsible-AI fields (collection, annotation, biases, limitations, "
        "personal information); `mlcroissant.Dataset(jsonld=PATH + "
        f"\"/{CROISSANT_FILE}\").records(\"triplets\")` reads the release through it.",
    ]
    text = "---\n" + yaml.safe_dump(meta, sort_keys=False, allow_unicode=True) + "---\n\n"
    text += "\n".join(body) + "\n"
    if DATASHEET.is_file():
        sheet = DATASHEET.read_text(encoding="utf-8")
        text += "\n---\n\n" + sheet
    return text
