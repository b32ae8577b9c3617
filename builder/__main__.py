"""``python -m builder``: the stages of a build, one line each, and how to run them."""

from __future__ import annotations

import argparse
import sys

from builder.stage_list import STAGES


def build_parser() -> argparse.ArgumentParser:
    lines = [f"  {s.name:<15}{s.command_line:<32}{s.summary}" for s in STAGES]
    return argparse.ArgumentParser(
        prog="python -m builder", formatter_class=argparse.RawDescriptionHelpFormatter,
        description="The stages of a 3XCM build, in order (each command has --help):\n\n"
                    + "\n".join(lines),
        epilog="python -m pipeline run      runs them all in order (each resumes)\n"
               "python -m pipeline status   where a build stands\n"
               "python -m pipeline.demo     a miniature build, offline")


def main(argv: list[str] | None = None) -> int:
    p = build_parser()
    args = sys.argv[1:] if argv is None else argv
    if args and args[0] not in ("-h", "--help"):
        p.error(f"{args[0]!r}: the stages run as their own commands (listed by --help); "
                "status, export and run are python -m pipeline's")
    p.print_help()
    return 0


if __name__ == "__main__":
    sys.exit(main())
