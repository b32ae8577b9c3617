"""``python -m benchmark.mteb.run ...``: mteb's own CLI, with the 3XCM tasks registered.

Our ``--xcm3-*`` options are taken out first (docs/mteb.md); the rest goes to mteb's parser.
A model or dataset missing from the local cache offline is one line, not a traceback.
"""

from __future__ import annotations

import argparse
import logging
import os
import sys

log = logging.getLogger(__name__)


def our_options(argv: list[str]) -> tuple[dict[str, object], list[str]]:
    """Split ``argv`` into our task options and mteb's arguments."""
    p = argparse.ArgumentParser(add_help=False)
    p.add_argument("--xcm3-dataset", dest="dataset", default=None)
    p.add_argument("--xcm3-xm3600", dest="xm3600", default=None)
    p.add_argument("--xcm3-bootstrap", dest="bootstrap", type=int, default=None)
    p.add_argument("--xcm3-seed", dest="seed", type=int, default=None)
    ns, rest = p.parse_known_args(argv)
    opts = {k: v for k, v in vars(ns).items() if v is not None}
    for k in ("bootstrap", "seed"):
        if k in opts and int(opts[k]) < 0:  # type: ignore[call-overload]
            p.error(f"--xcm3-{k} must be >= 0")
    return opts, rest


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    from benchmark.models import hub

    try:
        hub.require(("mteb",), "mteb", "benchmark.mteb.run")
    except hub.ModelLoadError as e:
        sys.stderr.write(f"error: {e}\n")
        return 2
    from core.hub import OFFLINE_HINT, hub_unreachable, one_line

    why = hub_unreachable()
    if why:  # the local cache only, at once (not after the hub client's retries)
        os.environ["HF_HUB_OFFLINE"] = os.environ["HF_DATASETS_OFFLINE"] = "1"
        hub.sync_offline_flag()
    offline = f"the hub cannot be reached: {why}" if why else (
        "HF_HUB_OFFLINE=1" if hub.offline() else None)
    from mteb.cli.build_cli import build_cli

    from benchmark.mteb import tasks as mteb_tasks

    opts, rest = our_options(argv)
    mteb_tasks.register(**opts)
    logging.basicConfig(level=logging.WARNING, format="%(message)s")
    args = build_cli().parse_args(rest)
    if not hasattr(args, "func"):
        build_cli().print_help()
        return 2
    try:
        args.func(args)
    except Exception as e:
        if offline is None:
            raise
        log.debug("offline failure", exc_info=True)
        sys.stderr.write(f"error: {one_line(e)} (offline, {offline}: the model and dataset "
                         f"must be in the local cache; {OFFLINE_HINT})\n")
        return 2
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
