"""``python -m triplets {sample,validate,export,publish}``: 3XCM triplets and the release.

:func:`stage_main` runs ``sample`` as the pipeline's ``triplets`` stage. Exit codes: 0 fine, 1
rule violations (validate, export) or no triplet sampled, 2 bad input or an unreachable
service (one line on stderr); the rest follows :mod:`core.clikit`.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from pathlib import Path

from core.clikit import CliKit, add_verbose, add_version, add_workdir
from core.options import plain

Handler = Callable[[argparse.Namespace], int]


def _sample_args(p: argparse.ArgumentParser) -> None:
    add_workdir(p)
    p.add_argument("--seed", type=int, default=0, help="sampling seed (default 0; recorded)")
    p.add_argument("--per-image", type=int, default=1, help="triplets per kept image (default 1)")
    p.add_argument("--distinct-language", action=argparse.BooleanOptionalAction, default=True,
                   help="semantic candidate from a country of another language (default on)")
    p.add_argument("--candidate-countries", default=None, metavar="ISO3,...",
                   help="semantic and non-relevant candidates only from these countries "
                        "(a controlled design; default: any other country)")


def _validate_args(p: argparse.ArgumentParser) -> None:
    g = p.add_mutually_exclusive_group(required=True)
    add_workdir(g, help="the catalog's triplets")
    g.add_argument("--release", help="a release folder")
    g.add_argument("--authors-csv", help="the authors' xcm-bench.csv (structural rules)")
    p.add_argument("--max-lines", type=int, default=200,
                   help="print at most this many violations (all are counted)")


def _export_args(p: argparse.ArgumentParser) -> None:
    add_workdir(p)
    p.add_argument("--out", required=True, help="release folder to write: new, empty, or one export wrote (updated in place)")
    p.add_argument("--shard-mb", type=int, default=256, help="image shard size (MB)")


def _publish_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--out", required=True, help="the release folder")
    p.add_argument("--repo-id", required=True, help="ORG/NAME of the dataset repo")
    p.add_argument("--private", action="store_true")
    p.add_argument("--revision", default=None, help="branch to push to (default main)")


def _print_violations(bad: list, max_lines: int) -> None:
    from triplets.rules import summarize, violation_line

    for v in bad[:max_lines]:
        print(violation_line(v))
    if len(bad) > max_lines:
        print(f"... {len(bad) - max_lines} more")
    counts = summarize(bad)
    print(f"{len(bad)} violation(s): " + ", ".join(f"{k}={n}" for k, n in sorted(counts.items())))


def cmd_sample(args: argparse.Namespace) -> int:
    from builder.catalog import Catalog
    from triplets.sample_run import run_sample
    from triplets.sampling import SampleConfig

    cand = args.candidate_countries
    cfg = SampleConfig(seed=args.seed, per_image=args.per_image,
                       distinct_language=args.distinct_language,
                       candidate_countries=None if cand is None else tuple(
                           c.strip().upper() for c in cand.split(",") if c.strip()))
    res = run_sample(args.workdir, cfg)
    with Catalog.open(args.workdir) as cat:  # what the stage-run record says
        print(cat.last_run("triplets")["summary"])
    return 0 if res.triplets else 1


def _croissant_ok(folder: Path, max_lines: int) -> bool:
    """Print the release's croissant.json problems (or that it is valid); True when none."""
    from triplets.croissant import CROISSANT_FILE, croissant_problems

    if not (folder / CROISSANT_FILE).is_file():
        # A release exported before Croissant metadata, or written by another tool: nothing to
        # check, and not a fault of its rows (a present but broken file is one).
        print(f"{CROISSANT_FILE}: absent, not checked (`python -m triplets export` writes it)")
        return True
    problems, how = croissant_problems(folder)
    for p in problems[:max_lines]:
        print(f"{CROISSANT_FILE}\t{p}")
    if len(problems) > max_lines:
        print(f"... {len(problems) - max_lines} more")
    print(f"{CROISSANT_FILE}: " + (f"{len(problems)} problem(s)" if problems else "valid")
          + f" (checked: {how})")
    return not problems


def cmd_validate(args: argparse.Namespace) -> int:
    from triplets.rules import check_triplets
    from triplets.sample_run import validate_workdir
    from triplets.sources import counts_table, read_authors_csv, release_violations

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
        rows, bad = release_violations(Path(args.release))
        n = len(rows)
        print(counts_table(rows))
        if not _croissant_ok(Path(args.release), args.max_lines) and not bad:
            return 1
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

    if args.shard_mb < 1:
        raise ExportError(f"--shard-mb must be at least 1, got {args.shard_mb}")
    try:
        res = export_release(args.workdir, args.out, shard_bytes=args.shard_mb * 1024 * 1024)
    except ExportError as e:
        if not e.violations:
            raise
        _print_violations(e.violations, 200)
        print(f"error: {e}", file=sys.stderr)
        return 1
    print(f"release: {res.out} ({res.n_triplets} triplets, {res.n_images} images, "
          f"{res.shards} image shard(s))")
    return 0


def cmd_publish(args: argparse.Namespace) -> int:
    from triplets.publish import publish

    url = publish(args.out, args.repo_id, private=args.private, revision=args.revision)
    print(f"published: {url}")
    return 0


# name -> (help, arguments, handler)
COMMANDS: dict[str, tuple[str, Callable[[argparse.ArgumentParser], None], Handler]] = {
    "sample": ("sample triplets from the kept, tagged images", _sample_args, cmd_sample),
    "validate": ("check every triplet rule; exit 1 on violations", _validate_args, cmd_validate),
    "export": ("write the release folder (parquet + dataset card)", _export_args, cmd_export),
    "publish": ("push a release folder to the Hugging Face Hub", _publish_args, cmd_publish),
}


def _parsers() -> tuple[argparse.ArgumentParser, dict[str, argparse.ArgumentParser]]:
    p = argparse.ArgumentParser(prog="python -m triplets",
                                description=plain(__doc__.splitlines()[0]))
    add_verbose(p)
    add_version(p)
    sub = p.add_subparsers(dest="command", required=True)
    for name, (help_, add_args, handler) in COMMANDS.items():
        s = sub.add_parser(name, help=help_, description=help_)
        # -v before or after the command (SUPPRESS: the subcommand keeps a -v given before it)
        add_verbose(s, default=argparse.SUPPRESS)
        add_args(s)
        s.set_defaults(command=name, handler=handler)
    return p, sub.choices


def build_parser() -> argparse.ArgumentParser:
    """``python -m triplets COMMAND ...``."""
    return _parsers()[0]


def build_stage_parser() -> argparse.ArgumentParser:
    """The ``triplets`` stage's parser: the ``sample`` command's own."""
    return _parsers()[1]["sample"]


def _user_errors() -> tuple[type[Exception], ...]:
    from core.datatables import TableError
    from core.errors import DataError
    from triplets.export import ExportError
    from triplets.publish import PublishError
    from triplets.sampling import SamplingError

    return (SamplingError, ExportError, PublishError, DataError, TableError)


def _damaged_database(exc: BaseException) -> str | None:
    from builder.stagekit import damaged_database

    return damaged_database(exc)


#: the triplets CLI's use of the one CLI kit
KIT = CliKit(extra="all", user_errors=_user_errors, error_lines=(_damaged_database,),
             database="the work dir's database")


def main(argv: list[str] | None = None) -> int:
    """``python -m triplets COMMAND ...``."""
    return KIT.main(build_parser(), lambda args: args.handler(args), argv)


def stage_main(argv: list[str] | None = None) -> int:
    """The ``triplets`` stage of ``python -m pipeline run``: ``sample`` with ``argv`` as its flags."""
    return KIT.main(build_stage_parser(), lambda args: args.handler(args), argv)
