"""``python -m triplets {sample,validate,export,publish}``: 3XCM triplets and the release.

Exit codes: 0 fine, 1 rule violations (validate, export), 2 bad input or unreachable service.
"""

from __future__ import annotations

import argparse
import logging
import sys
from pathlib import Path

log = logging.getLogger(__name__)


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m triplets", description=__doc__.splitlines()[0])
    p.add_argument("-v", "--verbose", action="store_true")
    sub = p.add_subparsers(dest="command", required=True)

    s = sub.add_parser("sample", help="sample triplets from the kept, tagged images")
    s.add_argument("--workdir", default=None, help="work dir (default $XCM_WORKDIR or ./xcm-work)")
    s.add_argument("--seed", type=int, default=0, help="sampling seed (default 0; recorded)")
    s.add_argument("--per-image", type=int, default=1, help="triplets per kept image (default 1)")
    s.add_argument("--distinct-language", action=argparse.BooleanOptionalAction, default=True,
                   help="semantic candidate from a country of another language (default on)")

    v = sub.add_parser("validate", help="check every triplet rule; exit 1 on violations")
    g = v.add_mutually_exclusive_group(required=True)
    g.add_argument("--workdir", help="the catalog's triplets")
    g.add_argument("--release", help="a release folder")
    g.add_argument("--authors-csv", help="the authors' xcm-bench.csv (structural rules)")
    v.add_argument("--max-lines", type=int, default=200,
                   help="print at most this many violations (all are counted)")

    e = sub.add_parser("export", help="write the release folder (parquet + dataset card)")
    e.add_argument("--workdir", default=None)
    e.add_argument("--out", required=True, help="release folder to write (replaced atomically)")
    e.add_argument("--shard-mb", type=int, default=256, help="image shard size (MB)")

    u = sub.add_parser("publish", help="push a release folder to the Hugging Face Hub")
    u.add_argument("--out", required=True, help="the release folder")
    u.add_argument("--repo-id", required=True, help="ORG/NAME of the dataset repo")
    u.add_argument("--private", action="store_true")
    u.add_argument("--revision", default=None, help="branch to push to (default main)")
    return p


def _print_violations(bad: list, max_lines: int) -> None:
    from triplets.rules import summarize, violation_line

    for v in bad[:max_lines]:
        print(violation_line(v))
    if len(bad) > max_lines:
        print(f"... {len(bad) - max_lines} more")
    counts = summarize(bad)
    print(f"{len(bad)} violation(s): " + ", ".join(f"{k}={n}" for k, n in sorted(counts.items())))


def cmd_sample(args: argparse.Namespace) -> int:
    from triplets.sample import SampleConfig
    from triplets.store import run_sample

    if args.per_image < 1:
        print("error: --per-image must be >= 1", file=sys.stderr)
        return 2
    cfg = SampleConfig(seed=args.seed, per_image=args.per_image,
                       distinct_language=args.distinct_language)
    res = run_sample(args.workdir, cfg)
    with _catalog(args.workdir) as cat:
        print(cat.last_run("triplets")["summary"])
    return 0 if res.triplets else 1


def _catalog(workdir):
    from builder.catalog import Catalog

    return Catalog.open(workdir)


def cmd_validate(args: argparse.Namespace) -> int:
    from triplets.rules import check_triplets
    from triplets.sources import (
        counts_table,
        image_byte_violations,
        read_authors_csv,
        read_release,
    )
    from triplets.store import validate_workdir

    if args.authors_csv:
        a = read_authors_csv(Path(args.authors_csv))
        bad = check_triplets(a.rows, None, tags_known=False, distinct_language=False,
                             seed_required=False, check_query_text=False) + a.extra
        print(counts_table(a.rows))
        print(f"\nsemantic candidates sharing the query country's language: "
              f"{a.same_language_semantic} (not a rule of the authors' file)")
        print(f"image ids given two labels in different rows: {len(a.conflicting_ids)}")
        n = len(a.rows)
    elif args.release:
        rows, images, build = read_release(Path(args.release))
        sampling = build.get("sampling", {})
        bad = check_triplets(rows, images, tags_known=True,
                             distinct_language=bool(sampling.get("distinct_language", False)),
                             seed=sampling.get("seed"))
        bad += image_byte_violations(Path(args.release))
        n = len(rows)
        print(counts_table(rows))
    else:
        bad, rows = validate_workdir(args.workdir)
        n = len(rows)
        if rows:
            print(counts_table(rows))
    if bad:
        print()
        _print_violations(bad, args.max_lines)
        return 1
    print(f"\n{n} triplets: every rule holds")
    return 0


def cmd_export(args: argparse.Namespace) -> int:
    from triplets.export import ExportError, export_release

    try:
        res = export_release(args.workdir, args.out, shard_bytes=args.shard_mb * 1024 * 1024)
    except ExportError as e:
        if e.violations:
            _print_violations(e.violations, 200)
            print(f"error: {e}", file=sys.stderr)
            return 1
        print(f"error: {e}", file=sys.stderr)
        return 2
    print(f"release: {res.out} ({res.n_triplets} triplets, {res.n_images} images, "
          f"{res.shards} image shard(s))")
    return 0


def cmd_publish(args: argparse.Namespace) -> int:
    from triplets.publish import publish

    url = publish(args.out, args.repo_id, private=args.private, revision=args.revision)
    print(f"published: {url}")
    return 0


COMMANDS = ("sample", "validate", "export", "publish")


def main(argv: list[str] | None = None) -> int:
    """Entry point of ``python -m triplets``.

    Without a command the arguments are those of ``sample``: that is how ``python -m builder
    run`` calls this stage (``--workdir W`` plus any ``--stage-args "triplets=--seed 7"``).
    """
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv and argv[0] not in ("-h", "--help") and not set(argv) & set(COMMANDS):
        argv = ["sample", *argv]
    args = _parser().parse_args(argv)
    logging.basicConfig(level=logging.DEBUG if args.verbose else logging.INFO,
                        format="%(levelname)s %(name)s: %(message)s")
    from benchmark.data import DataError
    from benchmark.tables import TableError
    from triplets.publish import PublishError
    from triplets.sources import SourceError

    handlers = {"sample": cmd_sample, "validate": cmd_validate, "export": cmd_export,
                "publish": cmd_publish}
    try:
        return handlers[args.command](args)
    except (SourceError, PublishError, DataError, TableError, ValueError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
