"""The release's ``croissant.json``: Croissant 1.1 (JSON-LD) with the RAI 1.0 fields from
``build.json``, the review runs and ``DATASHEET.md``; :func:`croissant_problems` checks one.
"""

from __future__ import annotations

import importlib.util
import json
import logging
import re
from pathlib import Path
from typing import Any

from core.files import atomic_write_text, sha256_bytes
from triplets.card import (
    CROISSANT_FILE,
    DATASHEET,
    IMAGE_COLUMN_DOCS,
    LICENCE_TERMS,
    LICENSE_FILE,
    SPLITS,
    TRIPLET_COLUMN_DOCS,
    release_languages,
)

log = logging.getLogger(__name__)

CROISSANT_VERSION = "http://mlcommons.org/croissant/1.1"
RAI_VERSION = "http://mlcommons.org/croissant/RAI/1.0"
PAPER_REPO = "https://github.com/ChulaAI/EVALUATING-PERSPECTIVAL-BIASES-IN-CROSS-MODAL-RETRIEVAL"
CITATION = (
    "@misc{3xcm,\n"
    "  title = {Evaluating Perspectival Biases in Cross-Modal Retrieval},\n"
    f"  howpublished = {{\\url{{{PAPER_REPO}}}}},\n"
    "  note = {3XCM: Cross-Cultural, Cross-lingual, Cross-Modal retrieval triplets}\n"
    "}"
)
#: The standard Croissant 1.1 ``@context`` (as ``mlcroissant`` writes it for 1.1).
CONTEXT: dict[str, Any] = {
    "@language": "en", "@vocab": "https://schema.org/", "arrayShape": "cr:arrayShape",
    "citeAs": "cr:citeAs", "column": "cr:column", "conformsTo": "dct:conformsTo",
    "containedIn": "cr:containedIn", "cr": "http://mlcommons.org/croissant/",
    "rai": "http://mlcommons.org/croissant/RAI/", "data": {"@id": "cr:data", "@type": "@json"},
    "dataType": {"@id": "cr:dataType", "@type": "@vocab"}, "dct": "http://purl.org/dc/terms/",
    "description": {"@container": "@language"},
    "equivalentProperty": "cr:equivalentProperty",
    "examples": {"@id": "cr:examples", "@type": "@json"}, "extract": "cr:extract",
    "field": "cr:field", "fileProperty": "cr:fileProperty", "fileObject": "cr:fileObject",
    "fileSet": "cr:fileSet", "format": "cr:format", "includes": "cr:includes",
    "isArray": "cr:isArray", "isLiveDataset": "cr:isLiveDataset", "jsonPath": "cr:jsonPath",
    "key": "cr:key", "md5": "cr:md5", "name": {"@container": "@language"},
    "parentField": "cr:parentField", "path": "cr:path", "recordSet": "cr:recordSet",
    "references": "cr:references", "regex": "cr:regex", "repeated": "cr:repeated",
    "replace": "cr:replace", "samplingRate": "cr:samplingRate", "sc": "https://schema.org/",
    "separator": "cr:separator", "source": "cr:source", "subField": "cr:subField",
    "transform": "cr:transform",
}
#: A feature's ``dtype`` in the card (``datasets`` YAML) -> Croissant ``dataType``.
DATA_TYPES = {"string": "sc:Text", "int32": "cr:Int32", "int64": "cr:Int64",
              "image": "sc:ImageObject", "bool": "sc:Boolean", "float32": "cr:Float32",
              "float64": "cr:Float64"}
#: Triplet columns that name an image of the ``images`` config.
IMAGE_REFERENCES = ("query_image_id", "semantic_image_id", "cultural_image_id",
                    "non_relevant_image_id")
#: RAI properties every release's file carries (checked by :func:`croissant_problems`).
RAI_KEYS = ("rai:dataCollection", "rai:dataCollectionType", "rai:dataPreprocessingProtocol",
            "rai:dataAnnotationProtocol", "rai:dataAnnotationPlatform",
            "rai:dataAnnotationAnalysis", "rai:annotationsPerItem",
            "rai:annotatorDemographics", "rai:machineAnnotationTools", "rai:dataBiases",
            "rai:dataLimitations", "rai:dataUseCases", "rai:personalSensitiveInformation",
            "rai:dataSocialImpact", "rai:dataReleaseMaintenancePlan")
PARQUET = "application/x-parquet"


def datasheet_items(text: str) -> dict[str, dict[str, str]]:
    """``{section: {label: text}}`` of the datasheet's bold-labelled list items (``- **Label.**
    text`` or ``1. **Label** text``), continuation lines joined, whitespace collapsed."""
    out: dict[str, dict[str, str]] = {}
    section, label, buf = "", None, []

    def flush() -> None:
        if label is not None:
            out.setdefault(section, {})[label] = " ".join(" ".join(buf).split())

    for line in text.splitlines():
        head = re.match(r"^## (.+)$", line)
        item = re.match(r"^(?:-|\d+\.) \*\*(.+?)\*\*:?\s*(.*)$", line)
        if head:
            flush()
            section, label, buf = head.group(1).strip(), None, []
        elif item:
            flush()
            label, buf = item.group(1).strip().rstrip(".:"), [item.group(2)]
        elif label is not None and line.startswith("  ") and line.strip():
            buf.append(line.strip())
        elif not line.strip() or line.startswith(("-", "#")) or re.match(r"^\d+\. ", line):
            flush()
            label, buf = None, []
    flush()
    return out


def _item(label: str, text: str) -> str:
    """``Label: text``; ``Label (module): ...`` where the datasheet's text goes on after it."""
    return f"{label} {text}" if text.startswith("(") else f"{label}: {text}"


def _compact(x: Any) -> str:
    return json.dumps(x, ensure_ascii=False, sort_keys=True, separators=(", ", ": "))


def _latest_runs(build: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """The last finished (``done``) run of each stage, in the order stages first ran."""
    out: dict[str, dict[str, Any]] = {}
    for r in build.get("stage_runs") or []:
        if r.get("status") == "done":
            out.pop(r["stage"], None)
            out[r["stage"]] = r
    return out


def _review_pulls(build: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """The last finished ``review`` pull per kind (its counts are the pull report)."""
    out: dict[str, dict[str, Any]] = {}
    for r in build.get("stage_runs") or []:
        params = r.get("params") or {}
        if r.get("stage") == "review" and r.get("status") == "done" and \
                params.get("action") == "pull" and isinstance(r.get("counts"), dict):
            out[str(params.get("kind"))] = r["counts"]
    return out


def _stat(x: Any) -> str:
    return "n/a" if x is None else (f"{x:.3f}" if isinstance(x, float) else str(x))


def annotation_fields(build: dict[str, Any], sheet: dict[str, dict[str, str]]) -> dict[str, Any]:
    """The RAI annotation properties from the datasheet's protocol and this build's records."""
    prep = sheet.get("Preprocessing, cleaning, labeling", {})
    numbers = build.get("numbers") or {}
    tags = numbers.get("tags") or {}
    pulls = _review_pulls(build)
    reviews = numbers.get("reviews") or {}
    protocol = [_item(k, prep[k]) for k in ("Human review", "Tagging") if k in prep]
    analysis, per_item, who = [], [], []
    for kind, rep in pulls.items():
        ag = rep.get("agreement") or {}
        if kind == "queries":
            for loc, part in sorted((rep.get("locales") or {}).items()):
                a = part.get("agreement") or {}
                analysis.append(f"query terms {loc}: agreement {_compact(a)}; annotators "
                                f"{len(part.get('annotators') or {})}")
        else:
            analysis.append(
                f"{kind}: Krippendorff's alpha {_stat(ag.get('krippendorff_alpha'))}, Fleiss' "
                f"kappa {_stat(ag.get('fleiss_kappa'))} over {ag.get('n_units', 0)} units rated "
                f"by exactly {ag.get('n_raters', rep.get('min_annotators'))} annotators; "
                f"decisions {_compact(rep.get('decisions') or {})}")
        per_item.append(f"{kind}: at least {rep.get('min_annotators')} annotator(s) per item")
    for kind, entry in sorted(reviews.items()):
        who.append(f"{kind}: {entry.get('annotations', 0)} current annotations by "
                   f"{entry.get('annotators', 0)} annotator(s) (Label Studio accounts)")
    if not reviews:
        analysis.append("No human review in this build (numbers.reviews is empty): the "
                        "concept and country of each image are those of its search.")
    analysis.append(
        f"tags: {tags.get('tagged_images', 0)} tagged images, "
        f"{tags.get('mean_tags_per_tagged_image', 0)} tags per tagged image, first tag equals "
        f"the crawl concept for {tags.get('share_first_tag_is_crawl_concept', 0):.1%}, tags "
        f"include it for {tags.get('share_tags_include_crawl_concept', 0):.1%}; states "
        f"{_compact(tags.get('images_by_tag_state') or {})}")
    per_item.append("tags: one machine answer per image (asked again once, alone, if invalid)")
    models = tags.get("models") or []
    tools = [f"tagging model {m} (prompt sha256 {', '.join(tags.get('prompt_sha256') or [])})"
             for m in models] or ["tagging: offline stand-in (each image tagged with its crawl "
                                  "concept only)"]
    for stage in ("concept_dedup", "image_dedup"):
        run = _latest_runs(build).get(stage)
        if run:
            tools.append(f"{stage}: parameters {_compact(run.get('params') or {})}")
    return {
        "rai:dataAnnotationProtocol": protocol,
        "rai:dataAnnotationPlatform": (["Label Studio (annotation package)"] if reviews else [])
        + [f"Gemini API ({m})" for m in models] + ([] if models else ["offline tagging"]),
        "rai:dataAnnotationAnalysis": analysis,
        "rai:annotationsPerItem": "; ".join(per_item),
        "rai:annotatorDemographics": who + [
            "Annotator demographics are not recorded by the toolkit; annotators are known only "
            "by their Label Studio account."],
        "rai:machineAnnotationTools": tools,
    }


def collection_fields(build: dict[str, Any], sheet: dict[str, dict[str, str]]) -> dict[str, Any]:
    """The RAI collection and preprocessing properties: datasheet text and the stage runs."""
    coll = sheet.get("Collection process", {})
    prep = sheet.get("Preprocessing, cleaning, labeling", {})
    runs = _latest_runs(build)
    stages = [f"stage {name} (run {r.get('run_id')}, ended {r.get('ended_at')}): "
              f"parameters {_compact(r.get('params') or {})}; counts "
              f"{_compact(r.get('counts') or {})}" for name, r in runs.items()]
    text = " ".join(_item(k, v) for k, v in coll.items())
    text += (" This build's stages (build.json stage_runs, last finished run of each): "
             + " | ".join(stages) if stages else " build.json records no finished stage run.")
    times = sorted(t for r in build.get("stage_runs") or []
                   for t in (r.get("started_at"), r.get("ended_at")) if t)
    out: dict[str, Any] = {
        "rai:dataCollection": text,
        "rai:dataCollectionType": ["Web Scraping", "Web API"]
        + (["Manual Human Curation"] if (build.get("numbers") or {}).get("reviews") else []),
        "rai:dataCollectionRawData": prep.get("Raw data", ""),
        "rai:dataPreprocessingProtocol": [_item(k, prep[k]) for k in
                                          ("Exact duplicates", "Near duplicates", "Triplet rules")
                                          if k in prep]
        + [f"sampling: {_compact(build.get('sampling') or {})}"],
    }
    if times:
        out["rai:dataCollectionTimeFrame"] = [times[0], times[-1]]
    return out


def rai_fields(build: dict[str, Any], datasheet_text: str) -> dict[str, Any]:
    """Every RAI property of the release (see the module docstring)."""
    sheet = datasheet_items(datasheet_text)
    comp, uses = sheet.get("Composition", {}), sheet.get("Uses", {})
    coll, maint = sheet.get("Collection process", {}), sheet.get("Maintenance", {})

    def pick(part: dict[str, str], *labels: str) -> list[str]:
        return [_item(k, part[k]) for k in labels if k in part]

    return {
        **collection_fields(build, sheet),
        **annotation_fields(build, sheet),
        "rai:dataBiases": pick(comp, "Labels", "Confidential or offensive data")
        + pick(uses, "Caveats"),
        "rai:dataLimitations": pick(comp, "Errors and noise") + pick(uses, "Not intended")
        + pick(coll, "Time frame"),
        "rai:dataUseCases": pick(uses, "Intended", "Not intended"),
        "rai:personalSensitiveInformation": pick(comp, "Confidential or offensive data")
        + pick(coll, "Consent"),
        "rai:dataSocialImpact": " ".join(pick(sheet.get("Motivation", {}), "Purpose", "Gap")),
        "rai:dataReleaseMaintenancePlan": " ".join(pick(maint, "Maintainer", "Takedown",
                                                        "Versions")),
    }


def _field(config: str, feat: dict[str, Any], docs: dict[str, str]) -> dict[str, Any]:
    name = feat["name"]
    dtype = feat.get("dtype", feat.get("list"))
    if dtype not in DATA_TYPES:
        raise ValueError(f"no Croissant dataType for the {config} feature {feat}")
    field: dict[str, Any] = {
        "@type": "cr:Field", "@id": f"{config}/{name}", "name": name,
        "description": docs.get(name, name), "dataType": DATA_TYPES[dtype],
        "source": {"fileSet": {"@id": f"{config}-parquet"}, "extract": {"column": name}},
    }
    if dtype == "image":  # the parquet column is datasets' {bytes, path} struct
        field["source"]["transform"] = {"jsonPath": "bytes"}
    if "list" in feat:
        field.update({"isArray": True, "arrayShape": "-1"})
    if config == "triplets" and name in IMAGE_REFERENCES:
        field["references"] = {"field": {"@id": "images/image_id"}}
    return field


def _file_object(folder: Path, name: str, fmt: str, what: str) -> dict[str, Any]:
    return {"@type": "cr:FileObject", "@id": name, "name": name, "description": what,
            "contentUrl": name, "encodingFormat": fmt,
            "sha256": sha256_bytes((folder / name).read_bytes())}


def croissant_metadata(folder: Path, features: dict[str, list[dict[str, Any]]],
                       build: dict[str, Any], datasheet_text: str) -> dict[str, Any]:
    """The JSON-LD of a release folder (its other files written); ``features`` as in the card."""
    numbers = build.get("numbers") or {}
    docs = {"images": IMAGE_COLUMN_DOCS, "triplets": TRIPLET_COLUMN_DOCS}
    distribution = [
        {"@type": "cr:FileSet", "@id": f"{c}-parquet", "name": f"{c}-parquet",
         "description": f"parquet shards of the {c} config (split {SPLITS[c]})",
         "encodingFormat": PARQUET, "includes": f"{c}/{SPLITS[c]}-*.parquet"}
        for c in ("triplets", "images")
    ]
    distribution += [
        _file_object(folder, "build.json", "application/json",
                     "seed, sampling settings, every stage run of the build, the numbers"),
        _file_object(folder, "provenance.jsonl", "application/jsonlines",
                     "one provenance record per released image"),
        _file_object(folder, LICENSE_FILE, "text/markdown", "the licence terms"),
    ]
    record_sets = [
        {"@type": "cr:RecordSet", "@id": c, "name": c,
         "description": (f"config {c}, split {SPLITS[c]}: "
                         + ("one row per kept image of a concept and country, bytes embedded"
                            if c == "images" else "one row per triplet; its four image ids "
                            "reference images/image_id")),
         **({"key": {"@id": "images/image_id"}} if c == "images" else
            {"key": {"@id": "triplets/triplet_id"}}),
         "field": [_field(c, f, docs[c]) for f in features[c]]}
        for c in ("triplets", "images")
    ]
    return {
        "@context": CONTEXT,
        "@type": "sc:Dataset",
        "conformsTo": [CROISSANT_VERSION, RAI_VERSION],
        "name": "3XCM",
        "description": (
            "3XCM (Cross-Cultural, Cross-lingual, Cross-Modal) measures association bias of "
            "multimodal retrievers: a query is a concept written in the native language of a "
            "country; the retriever picks one of three images: semantic (same concept, another "
            "country), cultural (same country, another concept) or non-relevant (neither). "
            f"This build: {numbers.get('triplets')} triplets, {numbers.get('images')} images, "
            f"{numbers.get('countries')} countries, {numbers.get('concepts')} concepts."),
        "citeAs": CITATION,
        "license": [{"@type": "sc:CreativeWork", "name": "3xcm-mixed", "url": LICENSE_FILE,
                     "description": " ".join(LICENCE_TERMS)}],
        "url": PAPER_REPO,
        "version": str(build.get("package_version") or "0.0.0"),
        "datePublished": build.get("exported_at"),
        "keywords": ["cross-modal retrieval", "text-to-image retrieval", "bias",
                     "multilingual", "multicultural", "benchmark"],
        "inLanguage": release_languages(),
        "distribution": distribution,
        "recordSet": record_sets,
        **rai_fields(build, datasheet_text),
    }


def write_croissant(folder: Path, features: dict[str, list[dict[str, Any]]],
                    build: dict[str, Any]) -> Path:
    """Write ``folder/croissant.json`` (atomically) and return its path."""
    sheet = DATASHEET.read_text(encoding="utf-8") if DATASHEET.is_file() else ""
    if not sheet:
        log.warning("no DATASHEET.md next to the package: the RAI text fields stay short")
    meta = croissant_metadata(folder, features, build, sheet)
    path = folder / CROISSANT_FILE
    atomic_write_text(path, json.dumps(meta, indent=1, ensure_ascii=False, allow_nan=False) + "\n")
    return path


def _structural_problems(folder: Path, meta: Any) -> list[str]:
    """What a reader needs of the file, checked without ``mlcroissant``."""
    import pyarrow.parquet as pq

    if not isinstance(meta, dict):
        return ["croissant.json is not a JSON object"]
    bad: list[str] = []
    conforms = meta.get("conformsTo")
    conforms = conforms if isinstance(conforms, list) else [conforms]
    if not any(isinstance(c, str) and re.fullmatch(r"http://mlcommons\.org/croissant/1\.\d+", c)
               for c in conforms):
        bad.append(f"conformsTo names no Croissant 1.x version: {conforms}")
    if meta.get("@type") != "sc:Dataset":
        bad.append(f"@type is {meta.get('@type')!r}, not sc:Dataset")
    for key in ("@context", "name", "description", "license", "citeAs", "distribution",
                "recordSet", *RAI_KEYS):
        if not meta.get(key):
            bad.append(f"{key} missing or empty")
    columns: dict[str, list[str]] = {}
    for d in meta.get("distribution") or []:
        if not isinstance(d, dict):
            bad.append(f"distribution entry is not an object: {d!r}")
        elif d.get("@type") == "cr:FileSet":
            files = sorted(folder.glob(str(d.get("includes", ""))))
            if not files:
                bad.append(f"FileSet {d.get('@id')}: no file matches {d.get('includes')!r}")
            else:
                columns[str(d.get("@id"))] = pq.read_schema(files[0]).names
        elif d.get("@type") == "cr:FileObject":
            path = folder / str(d.get("contentUrl", ""))
            if not path.is_file():
                bad.append(f"FileObject {d.get('@id')}: {d.get('contentUrl')!r} is not in the folder")
            elif d.get("sha256") != sha256_bytes(path.read_bytes()):
                bad.append(f"FileObject {d.get('@id')}: sha256 does not match the file")
    ids = {f.get("@id") for rs in meta.get("recordSet") or [] if isinstance(rs, dict)
           for f in rs.get("field") or [] if isinstance(f, dict)}
    for rs in meta.get("recordSet") or []:
        fields = rs.get("field") if isinstance(rs, dict) else None
        if not isinstance(fields, list):
            bad.append(f"recordSet {rs!r} has no field list")
            continue
        for f in fields:
            src = (f.get("source") or {}) if isinstance(f, dict) else {}
            fs = (src.get("fileSet") or {}).get("@id")
            col = (src.get("extract") or {}).get("column")
            if fs not in columns:
                bad.append(f"field {f.get('@id')}: source fileSet {fs!r} has no file")
            elif col not in columns[fs]:
                bad.append(f"field {f.get('@id')}: column {col!r} is not in {fs}")
            ref = ((f.get("references") or {}).get("field") or {}).get("@id")
            if ref is not None and ref not in ids:
                bad.append(f"field {f.get('@id')}: references unknown field {ref!r}")
        if rs.get("@id") in ("triplets", "images"):
            fs = f"{rs['@id']}-parquet"
            names = [f.get("name") for f in fields if isinstance(f, dict)]
            if fs in columns and names != columns[fs]:
                bad.append(f"recordSet {rs['@id']}: fields {names} differ from the parquet "
                           f"columns {columns[fs]}")
    for need in ("triplets", "images"):
        if need not in {rs.get("@id") for rs in meta.get("recordSet") or [] if isinstance(rs, dict)}:
            bad.append(f"recordSet {need} missing")
    return bad


def _mlcroissant_problems(path: Path) -> list[str]:
    """``mlcroissant``'s validation (errors and warnings) and one record of each record set."""
    import mlcroissant as mlc

    logging.getLogger("absl").setLevel(logging.WARNING)  # one INFO line per operation otherwise
    try:
        ds = mlc.Dataset(jsonld=str(path))
    except (mlc.ValidationError, ValueError) as e:
        return [f"mlcroissant: {ln.strip()}" for ln in str(e).splitlines() if ln.strip()]
    bad = [f"mlcroissant warning: {w}" for w in sorted(ds.metadata.ctx.issues.warnings)]
    for rs in ds.metadata.record_sets:
        try:
            next(iter(ds.records(rs.uuid)), None)
        except (ImportError, MemoryError):  # ours (a missing library, memory), not the file's
            raise
        except Exception as e:  # noqa: BLE001 - any failure to read is the file's problem
            first = (str(e).splitlines() or [""])[0]
            bad.append(f"mlcroissant: record set {rs.uuid}: {type(e).__name__}: {first}")
    return bad


def croissant_problems(folder: Path) -> tuple[list[str], str]:
    """Problems of ``folder/croissant.json`` and how it was checked (structural, + mlcroissant)."""
    path = folder / CROISSANT_FILE
    if not path.is_file():
        return [f"{CROISSANT_FILE} missing (export the release again with "
                "`python -m triplets export`)"], "structural"
    try:
        meta = json.loads(path.read_text(encoding="utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as e:
        return [f"{CROISSANT_FILE} is not JSON: {e}"], "structural"
    bad = _structural_problems(folder, meta)
    how = "structural"
    if importlib.util.find_spec("mlcroissant") is not None:
        from importlib.metadata import version

        how = f"mlcroissant {version('mlcroissant')} and structural"
        bad += _mlcroissant_problems(path)
    return bad, how
