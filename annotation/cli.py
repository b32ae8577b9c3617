"""The ``python -m annotation`` command line: human review in Label Studio.

Commands: push, pull, status, serve, assign, serve-images and sync (push the duplicate
groups, then pull; :func:`stage_main` runs it as the pipeline's ``review`` stage). Connection:
``LABEL_STUDIO_URL`` and ``LABEL_STUDIO_API_KEY``; exits follow :mod:`core.clikit`.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress
from typing import TYPE_CHECKING, Any

from annotation.client import AnnotationError, Connection
from annotation.configs import KINDS
from core.clikit import CliKit, add_verbose, add_version, add_workdir

if TYPE_CHECKING:
    from builder.catalog import Catalog

log = logging.getLogger(__name__)

Handler = Callable[[argparse.Namespace], int]


def _images_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--images", default="local-files",
                   help="'local-files' (Label Studio's local-files storage, default) or the base "
                        "URL of serve-images, e.g. http://127.0.0.1:8081")
    p.add_argument("--document-root", help="LOCAL_FILES_DOCUMENT_ROOT of the Label Studio server "
                   "(default: the same environment variable here)")


def _min_annotators_arg(p: argparse.ArgumentParser) -> None:
    p.add_argument("--min-annotators", type=int, default=None,
                   help="answers a unit needs before the majority decides (default 3; "
                        "queries: 2 assigned reviewers)")


def _countries_arg(p: argparse.ArgumentParser) -> None:
    p.add_argument("--countries", help="queries: only these countries (comma-separated codes "
                   "or names, e.g. PRT,BRA; default all)")


def _push_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--kind", choices=KINDS, required=True)
    p.add_argument("--project-title", help="project title (default: '3XCM duplicate review' / "
                   "'3XCM tag check')")
    _images_args(p)
    p.add_argument("--group-status", action="append", dest="statuses",
                   help="duplicates: push groups with this status (repeatable; default needs_review)")
    p.add_argument("--annotators", type=int, default=None,
                   help="annotations each task collects (maximum_annotations; default: the "
                        "project's, 3 for a new one)")
    p.add_argument("--sample", type=int, default=200, help="tags: images to sample (default 200)")
    p.add_argument("--seed", type=int, default=0, help="tags: sampling seed (default 0)")
    p.add_argument("--add-tasks", action="store_true",
                   help="tags: add the sampled images the project does not hold yet (a project "
                        "with tasks keeps its sample otherwise: another --seed or --sample adds "
                        "nothing)")
    _countries_arg(p)
    p.add_argument("--include-reviewed", action="store_true",
                   help="queries: push terms already reviewed again")


def _pull_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--kind", choices=KINDS, required=True)
    _min_annotators_arg(p)
    p.add_argument("--json", action="store_true", help="print the report as JSON")
    p.add_argument("--export-file", help="a JSON export saved from Label Studio (Export > JSON) "
                   "instead of downloading it")
    _countries_arg(p)


def _assign_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--locale", help="the locale, e.g. pt-PT (without --reviewer: list it)")
    p.add_argument("--reviewer", action="append", default=[],
                   help="a reviewer's Label Studio e-mail (repeatable)")
    p.add_argument("--remove", action="store_true", help="unassign the given reviewers")


def _status_args(p: argparse.ArgumentParser) -> None:
    _min_annotators_arg(p)
    p.add_argument("--json", action="store_true", help="print as JSON")


def _sync_args(p: argparse.ArgumentParser) -> None:
    _images_args(p)
    _min_annotators_arg(p)


def _serve_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--host", default="127.0.0.1", help="bind address (default 127.0.0.1)")
    p.add_argument("--port", type=int, default=8081, help="port (default 8081)")


def _ls_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--port", type=int, default=8080, help="port on 127.0.0.1 (default 8080)")
    p.add_argument("--label-studio", help="the label-studio executable (default: "
                   ".venv-ls/bin/label-studio, else PATH)")


def _serve_ls(args: argparse.Namespace) -> int:
    from annotation.serve import serve
    from builder.workdir import WorkDir

    return serve(WorkDir.open(args.workdir).root, args.port, args.label_studio,
                 lambda line: print(line, flush=True))


def _body(args: argparse.Namespace) -> int:
    """The command's handler, once its counts are checked."""
    for flag in ("min_annotators", "annotators", "sample"):
        value = getattr(args, flag, None)
        if value is not None and value < 1:
            raise AnnotationError(f"--{flag.replace('_', '-')} must be at least 1")
    return args.handler(args)


@contextmanager
def _session(args: argparse.Namespace) -> Iterator[tuple[Catalog, Connection]]:
    """A checked connection, then the work dir's catalog (no server: no catalog created)."""
    from annotation.client import connect
    from builder.catalog import Catalog

    conn = connect()
    with Catalog.open(args.workdir) as cat:
        yield cat, conn


def _countries(spec: str | None) -> list[Any] | None:
    from core import datatables

    if spec is None:
        return None
    try:
        return datatables.resolve_countries(spec)
    except datatables.TableError as exc:  # its own words name the flag when the list is empty
        raise AnnotationError(str(exc) if str(exc).startswith("--countries")
                              else f"--countries: {exc}") from None


def _push(args: argparse.Namespace) -> int:
    from annotation.push import push
    from annotation.query_review import push_queries

    chosen = _countries(args.countries)
    countries = None if chosen is None else [c.code for c in chosen]
    if args.kind == "queries" and args.project_title:
        raise AnnotationError("--project-title does not apply to --kind queries (one project "
                              "per locale, '3XCM query terms <locale>')")
    if args.kind != "queries" and (countries or args.include_reviewed):
        raise AnnotationError("--countries and --include-reviewed apply to --kind queries only")
    if args.kind != "tags" and args.add_tasks:
        raise AnnotationError("--add-tasks applies to --kind tags only (duplicates and queries "
                              "add what the catalog asks for)")
    with _session(args) as (cat, conn):
        if args.kind == "queries":
            reports = push_queries(cat, conn, countries=countries, images=args.images,
                                   include_reviewed=args.include_reviewed,
                                   document_root=args.document_root, annotators=args.annotators)
        else:
            reports = [push(cat, conn, args.kind, title=args.project_title, images=args.images,
                            document_root=args.document_root,
                            statuses=tuple(args.statuses or ["needs_review"]),
                            sample=args.sample, seed=args.seed, annotators=args.annotators,
                            add_tasks=args.add_tasks)]
    for rep in reports:
        print(rep.summary())
    return 0


def _pull(args: argparse.Namespace) -> int:
    from annotation.pull import format_report, pull, read_export_file

    countries = _countries(args.countries)
    if args.kind != "queries" and countries is not None:
        raise AnnotationError("--countries applies to --kind queries only")
    locales = None if countries is None else sorted({c.locale for c in countries})
    # a broken file is one line before any server or catalog is touched; read once
    exported = read_export_file(args.export_file) if args.export_file else None
    with _session(args) as (cat, conn):
        report = pull(cat, conn, args.kind, args.min_annotators, export_file=args.export_file,
                      exported=exported, locales=locales)
    print(json.dumps(report, indent=2, sort_keys=True) if args.json else format_report(report))
    return 0


def _assign(args: argparse.Namespace) -> int:
    import re

    from annotation.client import connect, user_names
    from annotation.projects import assign_reviewers, assigned_reviewers, known_reviewers
    from builder.catalog import Catalog

    if args.locale and not re.fullmatch(r"[a-z]{2,3}-[A-Z]{2}", args.locale):
        raise AnnotationError(f"--locale must be a BCP-47 locale with region like pt-PT, "
                              f"got {args.locale!r}")
    if args.reviewer and not args.locale:
        raise AnnotationError("--reviewer needs --locale")
    bad = [r for r in args.reviewer if not r.strip() or any(ch.isspace() for ch in r.strip())]
    if bad:
        raise AnnotationError(f"--reviewer must be a Label Studio e-mail, got {bad[0]!r}")
    emails = [r.strip() for r in args.reviewer]
    if emails and not args.remove:  # only people with an account on the server can answer
        conn = connect()
        emails = known_reviewers(emails, user_names(conn.client), conn.server)
    with Catalog.open(args.workdir) as cat:
        if emails:
            n = assign_reviewers(cat, args.locale, emails, args.remove)
            print(f"{'unassigned' if args.remove else 'assigned'} {n} reviewer(s) "
                  f"{'from' if args.remove else 'to'} {args.locale}")
        for locale, emails in assigned_reviewers(cat, args.locale).items():
            print(f"{locale}: {', '.join(emails)}")
    return 0


def _status(args: argparse.Namespace) -> int:
    from annotation.status import format_status, status

    with _session(args) as (cat, conn):
        items = status(cat, conn, args.min_annotators)
    print(json.dumps(items, indent=2, sort_keys=True) if args.json else format_status(items))
    return 0


def _sync(args: argparse.Namespace) -> int:
    from annotation.pull import format_report, pull
    from annotation.push import push

    if not os.environ.get("LABEL_STUDIO_URL", "").strip():
        print("review: LABEL_STUDIO_URL is not set, so the human review is skipped "
              "(see docs/annotation.md)")
        return 0
    with _session(args) as (cat, conn):
        rep = push(cat, conn, "duplicates", images=args.images, document_root=args.document_root)
        print(rep.summary())
        if not rep.nothing:  # no project: nothing to pull
            print(format_report(pull(cat, conn, "duplicates", args.min_annotators)))
    return 0


def _serve(args: argparse.Namespace) -> int:
    from annotation.serve import make_server
    from builder.workdir import WorkDir

    wd = WorkDir.open(args.workdir)
    if args.host not in ("127.0.0.1", "localhost", "::1"):
        log.warning("serving images on %s: reachable from other machines", args.host)
    with make_server(wd.images_dir, args.host, args.port) as srv, suppress(KeyboardInterrupt):
        host, port = srv.server_address[:2]
        print(f"serving {wd.images_dir} read-only at http://{host}:{port}/img/<sha256>.<ext> "
              "(Ctrl-C stops)", flush=True)
        srv.serve_forever()
    return 0


# name -> (help, arguments, handler)
COMMANDS: dict[str, tuple[str, Callable[[argparse.ArgumentParser], None], Handler]] = {
    "push": ("create/reuse the project, reconcile its tasks with the catalog (created / "
             "unchanged / changed / retired) and import the missing ones", _push_args, _push),
    "pull": ("store every annotation, decide by majority, apply, agreement", _pull_args, _pull),
    "status": ("live and retired tasks, counted answers per task (0/1/2/3+), agreement so "
               "far, per annotator done/remaining, stuck tasks, answers not counted",
               _status_args, _status),
    "assign": ("assign reviewers to a locale of the query-term review (only their answers "
               "count; each must have an account on the server, matched without case); without "
               "--reviewer, list the assignments", _assign_args, _assign),
    "sync": ("the builder's review stage: push duplicates, then pull (a no-op notice without "
             "LABEL_STUDIO_URL)", _sync_args, _sync),
    "serve": ("start Label Studio for the work dir on 127.0.0.1 (data under W/label-studio, "
              "images through local-files storage, no telemetry, admin from "
              "LABEL_STUDIO_USERNAME/PASSWORD); prints the URL and the invitation link",
              _ls_args, _serve_ls),
    "serve-images": ("read-only server of the work dir's images", _serve_args, _serve),
}


def _parsers() -> tuple[argparse.ArgumentParser, dict[str, argparse.ArgumentParser]]:
    ap = argparse.ArgumentParser(
        prog="python -m annotation",
        description="Human review of 3XCM in Label Studio (LABEL_STUDIO_URL, LABEL_STUDIO_API_KEY).",
    )
    add_version(ap)
    sub = ap.add_subparsers(dest="command", required=True)
    for name, (help_, add_args, handler) in COMMANDS.items():
        p = sub.add_parser(name, help=help_, description=help_)
        add_workdir(p)
        add_verbose(p)
        add_args(p)
        p.set_defaults(command=name, handler=handler)
    return ap, sub.choices


def build_parser() -> argparse.ArgumentParser:
    """``python -m annotation COMMAND ...``."""
    return _parsers()[0]


def _request_failed(exc: BaseException) -> str | None:
    """The one line for a request Label Studio refused or could not answer."""
    try:
        import httpx
        from label_studio_sdk.core.api_error import ApiError
    except ImportError:  # the SDK is missing: then this was not one of its errors
        return None
    if not isinstance(exc, (ApiError, httpx.TransportError)):
        return None
    status_code = getattr(exc, "status_code", None)
    body = getattr(exc, "body", None)
    return (f"Label Studio request failed ({type(exc).__name__}"
            f"{f' HTTP {status_code}' if status_code else ''}): {str(body or exc)[:300]}")


def _damaged_database(exc: BaseException) -> str | None:
    from builder.stagekit import damaged_database

    return damaged_database(exc)


def _user_errors() -> tuple[type[BaseException], ...]:
    from builder.catalog import CatalogError

    return (AnnotationError, CatalogError)


#: the annotation CLI's use of the one CLI kit
KIT = CliKit(extra="annotation", user_errors=_user_errors,
             error_lines=(_damaged_database, _request_failed), database="the work dir's database")


def main(argv: list[str] | None = None) -> int:
    """``python -m annotation COMMAND ...``."""
    return KIT.main(build_parser(), _body, argv)


def stage_main(argv: list[str] | None = None) -> int:
    """The ``review`` stage of ``python -m pipeline run``: ``sync`` with ``argv`` as its flags
    (the ``sync`` command's own parser)."""
    return KIT.main(_parsers()[1]["sync"], _body, argv)
