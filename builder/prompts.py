"""The builder's prompts, ``data/prompts/*.txt``, checked against the stage's placeholders."""

from __future__ import annotations

from string import Template

from builder.stagekit import StageInputError
from core import datatables


def load_prompt(name: str, placeholders: tuple[str, ...]) -> tuple[Template, str]:
    """``data/prompts/<name>`` as a template checked against ``placeholders``, and its sha256."""
    try:
        prompt = datatables.data_file(f"prompts/{name}")
    except datatables.TableError as exc:
        raise StageInputError(f"prompt {name!r} not found: {exc}") from exc
    template = Template(prompt.text)
    try:
        template.substitute({p: "" for p in placeholders})
    except (KeyError, ValueError) as exc:
        use = ", ".join(f"${p}" for p in placeholders)
        raise StageInputError(f"{prompt.path}: bad placeholder {exc} (use {use})") from exc
    return template, prompt.sha256
