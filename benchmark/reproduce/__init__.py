"""``python -m benchmark reproduce``: the paper's suite with the authors' conventions, compared
with the paper's tables cell by cell (plan, run, compare, report; docs/reproduce.md)."""
