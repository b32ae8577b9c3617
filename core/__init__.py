"""The shared core every package stands on: files, text, the data/ tables, the CLI kit and
typed options, logs, devices, the image decoder, and the release format and rules that both
the triplet tools and the evaluator use. It imports nothing of ours above it."""

from importlib.metadata import PackageNotFoundError, version

try:  # the one version of the toolkit: the installed package's metadata (pyproject.toml)
    __version__ = version("xcm3")
except PackageNotFoundError:  # run from a checkout that was never installed
    __version__ = "0+unknown"
