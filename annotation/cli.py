"""The ``python -m annotation`` command line: human review in Label Studio.

Commands: ``push`` (tasks to Label Studio), ``pull`` (annotations back, decisions, agreement),
``status`` (progress), ``serve-images`` (read-only image server on 127.0.0.1), and ``sync``
(the ``review`` stage of ``python -m builder run``: push the duplicate groups, then pull;
without ``LABEL_STUDIO_URL`` it only says that the human review is not configured). Without a
command, ``sync`` runs. Connection: ``LABEL_STUDIO_URL`` and ``LABEL_STUDIO_API_KEY``. Errors a
user can fix are one line on stderr and exit code 2.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import sys

from annotation.client import AnnotationError
from annotation.configs import KINDS

log = logging.getLogger("annotation")
COMMANDS = ("push", "pull", "status", "serve-images", "sync")


def _common(p: argparse.ArgumentParser) -> None:
    p.add_argument("--workdir", help="work dir (default: $XCM_WORKDIR or ./xcm-work)")
    p.add_argument("-v", "--verbose", action="store_true", help="debug logging")


def build_parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(
        prog="python -m annotation",
        description="Human review of 3XCM in Label Studio (LABEL_STUDIO_URL, LABEL_STUDIO_API_KEY).",
    )
    sub = ap.add_subparsers(dest="command", required=True)
    p = sub.add_parser("push", help="create/reuse the project and import the missing tasks")
    _common(p)
    p.add_argument("--kind", choices=KINDS, required=True)
    p.add_argument("--project-title", help="project title (default: '3XCM duplicate review' / "
                   "'3XCM tag check')")
    p.add_argument("--images", default="local-files",
                   help="'local-files' (Label Studio's local-files storage, default) or the base "
                        "URL of `serve-images`, e.g. http://127.0.0.1:8081")
    p.add_argument("--document-root", help="LOCAL_FILES_DOCUMENT_ROOT of the Label Studio server "
                   "(default: the same environment variable here)")
    p.add_argument("--group-status", action="append", dest="statuses",
                   help="duplicates: push groups with this status (repeatable; default needs_review)")
    p.add_argument("--annotators", type=int, default=None,
                   help="annotations each task collects (maximum_annotations; default: the "
                        "project's, 3 for a new one)")
    p.add_argument("--sample", type=int, default=200, help="tags: images to sample (default 200)")
    p.add_argument("--seed", type=int, default=0, help="tags: sampling seed (default 0)")
    p = sub.add_parser("pull", help="store every annotation, decide by majority, apply, agreement")
    _common(p)
    p.add_argument("--kind", choices=KINDS, required=True)
    p.add_argument("--min-annotators", type=int, default=3,
                   help="votes an image needs before the majority decides (default 3)")
    p.add_argument("--json", action="store_true", help="print the report as JSON")
    p = sub.add_parser("status", help="tasks, annotated by 0/1/2/3+, agreement so far")
    _common(p)
    p.add_argument("--min-annotators", type=int, default=3)
    p.add_argument("--json", action="store_true", help="print as JSON")
    p = sub.add_parser("sync", help="the builder's review stage: push duplicates, then pull "
                       "(a no-op notice without LABEL_STUDIO_URL)")
    _common(p)
    p.add_argument("--images", default="local-files", help="as for push")
    p.add_argument("--document-root", help="as for push")
    p.add_argument("--min-annotators", type=int, default=3, help="as for pull")
    p = sub.add_parser("serve-images", help="read-only server of the work dir's images")
    _common(p)
    p.add_argument("--host", default="127.0.0.1", help="bind address (default 127.0.0.1)")
    p.add_argument("--port", type=int, default=8081, help="port (default 8081)")
    return ap


def _serve(args: argparse.Namespace) -> int:
    from annotation.serve import make_server
    from builder.workdir import WorkDir

    wd = WorkDir.open(args.workdir)
    if args.host not in ("127.0.0.1", "localhost", "::1"):
        log.warning("serving images on %s: reachable from other machines", args.host)
    srv = make_server(wd.images_dir, args.host, args.port)
    host, port = srv.server_address[:2]
    print(f"serving {wd.images_dir} read-only at http://{host}:{port}/img/<sha256>.<ext> "
          "(Ctrl-C stops)", flush=True)
    try:
        srv.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        srv.server_close()
    return 0


def run(args: argparse.Namespace) -> int:
    """Dispatch one parsed command (errors propagate)."""
    if args.command == "serve-images":
        return _serve(args)
    from annotation.client import connect
    from builder.catalog import Catalog

    for flag in ("min_annotators", "annotators", "sample"):
        value = getattr(args, flag, None)
        if value is not None and value < 1:
            raise AnnotationError(f"--{flag.replace('_', '-')} must be at least 1")
    if args.command == "sync" and not os.environ.get("LABEL_STUDIO_URL", "").strip():
        print("review: LABEL_STUDIO_URL is not set, so the human review is skipped "
              "(see docs/annotation.md)")
        return 0
    conn = connect()
    with Catalog.open(args.workdir) as cat:
        if args.command in ("push", "sync"):
            from annotation.push import push

            rep = push(cat, conn, getattr(args, "kind", "duplicates"),
                       title=getattr(args, "project_title", None), images=args.images,
                       document_root=args.document_root,
                       statuses=tuple(getattr(args, "statuses", None) or ["needs_review"]),
                       sample=getattr(args, "sample", 200), seed=getattr(args, "seed", 0),
                       annotators=getattr(args, "annotators", None))
            print(rep.summary())
        if args.command == "sync":
            from annotation.pull import format_report, pull

            print(format_report(pull(cat, conn, "duplicates", args.min_annotators)))
        elif args.command == "pull":
            from annotation.pull import format_report, pull

            report = pull(cat, conn, args.kind, args.min_annotators)
            print(json.dumps(report, indent=2, sort_keys=True) if args.json
                  else format_report(report))
        elif args.command == "status":
            from annotation.status import format_status, status

            items = status(cat, conn, args.min_annotators)
            print(json.dumps(items, indent=2, sort_keys=True) if args.json
                  else format_status(items))
    return 0


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if not argv or argv[0] not in COMMANDS and argv[0] not in ("-h", "--help"):
        argv = ["sync", *argv]  # the builder's stage runner calls main(["--workdir", W])
    args = build_parser().parse_args(argv)
    logging.basicConfig(level=logging.DEBUG if args.verbose else logging.WARNING,
                        format="%(levelname)s %(name)s: %(message)s")
    try:
        return run(args)
    except AnnotationError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    except Exception as exc:  # the SDK's HTTP errors: one line, not a traceback
        from annotation.client import api_errors

        if isinstance(exc, api_errors()):
            status_code = getattr(exc, "status_code", None)
            body = getattr(exc, "body", None)
            print(f"error: Label Studio request failed ({type(exc).__name__}"
                  f"{f' HTTP {status_code}' if status_code else ''}): {str(body or exc)[:300]}",
                  file=sys.stderr)
            return 2
        raise
