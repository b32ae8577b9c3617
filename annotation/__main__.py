"""``python -m annotation``: human review in Label Studio.

Commands: ``push`` (tasks to Label Studio), ``pull`` (annotations back, decisions, agreement),
``status`` (progress), ``serve-images`` (read-only image server on 127.0.0.1). Connection:
``LABEL_STUDIO_URL`` and ``LABEL_STUDIO_API_KEY``. Errors a user can fix are one line on
stderr and exit code 2.
"""

from __future__ import annotations

import argparse
import json
import logging
import sys

from annotation.client import AnnotationError
from annotation.configs import KINDS

log = logging.getLogger("annotation")


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

    if getattr(args, "min_annotators", 1) < 1:
        raise AnnotationError("--min-annotators must be at least 1")
    conn = connect()
    with Catalog.open(args.workdir) as cat:
        if args.command == "push":
            from annotation.push import push

            if args.sample < 1:
                raise AnnotationError("--sample must be at least 1")
            rep = push(cat, conn, args.kind, title=args.project_title, images=args.images,
                       document_root=args.document_root,
                       statuses=tuple(args.statuses or ["needs_review"]),
                       sample=args.sample, seed=args.seed)
            print(rep.summary())
        elif args.command == "pull":
            from annotation.pull import format_report, pull

            report = pull(cat, conn, args.kind, args.min_annotators)
            print(json.dumps(report, indent=2, sort_keys=True) if args.json
                  else format_report(report))
        else:
            from annotation.status import format_status, status

            items = status(cat, conn, args.min_annotators)
            print(json.dumps(items, indent=2, sort_keys=True) if args.json
                  else format_status(items))
    return 0


def main(argv: list[str] | None = None) -> int:
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


if __name__ == "__main__":
    sys.exit(main())
