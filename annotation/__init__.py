"""Human review of 3XCM in Label Studio: push tasks, pull annotations, decide, measure agreement.

``python -m annotation push|pull|status|serve-images|sync`` (see ``docs/annotation.md``).
:func:`main` is also the ``review`` stage of ``python -m builder run`` (``sync``).
"""

from __future__ import annotations


def main(argv: list[str] | None = None) -> int:
    """The CLI (``annotation.cli.main``), imported lazily so importing the package is cheap."""
    from annotation.cli import main as cli_main

    return cli_main(argv)
