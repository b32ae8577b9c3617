"""3XCM triplets: seeded sampling from the tagged image pool, validation, export and publishing.

``python -m triplets sample|validate|export|publish`` (see :mod:`triplets.cli`). Modules:
``pool`` (the kept images of a catalog), ``sample`` (the sampler), ``rules`` (triplet rules),
``store`` (catalog I/O), ``sources`` (release folder / authors' CSV readers), ``export`` and
``card`` (the release folder and its dataset card), ``numbers`` (datasheet numbers),
``publish`` (Hugging Face Hub).
"""

from __future__ import annotations


def main(argv: list[str] | None = None) -> int:
    """The stage entry point ``python -m builder run`` calls (see :func:`triplets.cli.main`)."""
    from triplets.cli import main as cli_main

    return cli_main(argv)
