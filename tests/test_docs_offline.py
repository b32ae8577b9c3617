"""The offline page a newcomer follows: linked from the README's first screen, and every
command of its stage-by-stage recipe is one the CLIs accept as written; the set-up's font
check covers every script the figures label."""

from __future__ import annotations

import importlib
import re
import shlex
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
MODULES = {"builder.crawl": "builder.crawl.stage", "builder.tagging": "builder.tagging.stage",
           "triplets": "triplets.cli", "benchmark": "benchmark.cli", "builder": "pipeline.cli"}


def test_the_readme_first_screen_links_the_offline_page():
    first_screen = ROOT.joinpath("README.md").read_text(encoding="utf-8").splitlines()[:15]
    assert any("docs/offline.md" in line for line in first_screen)


def recipe() -> list[list[str]]:
    text = ROOT.joinpath("docs", "offline.md").read_text(encoding="utf-8")
    block = text.split("## Every stage offline", 1)[1].split("```sh", 1)[1].split("```", 1)[0]
    out = []
    for line in block.splitlines():
        line = line.split("#", 1)[0].strip().replace("$W", "xcm-work")
        line = re.sub(r"^(\w+=\S+ )+", "", line)  # HF_HUB_OFFLINE=1 ...
        if line.startswith("python -m "):
            out.append(shlex.split(line)[2:])
    return out


@pytest.mark.parametrize("argv", recipe(), ids=lambda a: " ".join(a[:2]))
def test_every_command_of_the_recipe_parses(argv):
    module = importlib.import_module(MODULES.get(argv[0], argv[0]))
    module.build_parser().parse_args(argv[1:])


def test_the_recipe_runs_every_builder_stage():
    from pipeline.stages import STAGES

    named = {a[0] for a in recipe()}
    for st in STAGES:
        if st.name != "review":  # skipped without LABEL_STUDIO_URL (the page says so)
            assert st.module_name.removesuffix(".stage") in named or st.name in named, st.name


def test_make_fonts_checks_a_family_of_every_script():
    from benchmark.report import style

    make = ROOT.joinpath("Makefile").read_text(encoding="utf-8")
    families = re.search(r"^FONT_FAMILIES := (.+)$", make, re.M).group(1).split("|")
    for script, names in style.FONT_GROUPS.items():
        if script != "latin":
            assert set(names) & set(families), f"make fonts does not check {script}"
