# Set-up and entry points. Each target installs what it needs (idempotent; stamps in the venvs).
#   make demo   set up .venv and run the main job on its embedded default
#   make test   set up .venv, Label Studio's own .venv-ls, img2dataset's own .venv-i2d, the
#               fonts and the browser, then run the tests
PY ?= python3
VENV := .venv
LSVENV := .venv-ls
I2DVENV := .venv-i2d
PIP := $(VENV)/bin/pip
# Debian fonts so plots render Thai, Devanagari, Arabic and CJK labels.
FONT_PKGS := fonts-noto-core fonts-noto-cjk
# Debian's Chromium and its driver for the review-UI tests in a real browser
# (tests/annotation/test_browser.py; Selenium uses /usr/bin/chromedriver, downloads nothing).
BROWSER_PKGS := chromium chromium-driver

.PHONY: demo synthetic test setup setup-ls setup-i2d fonts browser lint bench

# colpali-engine 0.3.12 (its processor and scorer are those of git 9bee9b2b, the version the
# paper's authors pinned) requires torch<2.8 and transformers<4.54: it is installed WITHOUT its
# dependencies, for the tests that compare our ColQwen prompts and scorer with its own code
# (tests/benchmark/models/test_conventions_colpali.py; they skip when it is absent).
COLPALI := colpali-engine==0.3.12

$(VENV)/.installed: pyproject.toml
	$(PY) -m venv $(VENV)
	$(PIP) install -q --upgrade pip
	$(PIP) install -q -e '.[all,dev]'
	$(PIP) install -q --no-deps '$(COLPALI)'
	touch $@

# label-studio 1.23 pins pyarrow<25, pytz<2023, openai<2, Django 5.2: it gets its own venv.
$(LSVENV)/.installed:
	$(PY) -m venv $(LSVENV)
	$(LSVENV)/bin/pip install -q --upgrade pip
	$(LSVENV)/bin/pip install -q 'label-studio==1.23.*'
	touch $@

# img2dataset 1.47 pins albumentations<2, webdataset<0.3, fire<0.8 and pulls opencv and wandb:
# its own venv, used only as a subprocess (tests/builder/test_img2dataset.py,
# tests/perf/bench_download.py). ~0.8 GB, ~1 min. Pinned: the round-trip test checks this version.
$(I2DVENV)/.installed:
	$(PY) -m venv $(I2DVENV)
	$(I2DVENV)/bin/pip install -q --upgrade pip
	$(I2DVENV)/bin/pip install -q 'img2dataset==1.47.0'
	touch $@

setup: $(VENV)/.installed
setup-ls: $(LSVENV)/.installed
setup-i2d: $(I2DVENV)/.installed

# One family per script the figures label (benchmark/report/style.py FONT_GROUPS): each is
# checked, the packages installed when one is missing, matplotlib's font list rebuilt (it
# caches the fonts it saw at its first import), and each checked again.
FONT_FAMILIES := Noto Sans Thai|Noto Sans Devanagari|Noto Sans Arabic|Noto Sans CJK JP
MPL_CACHE = $${MPLCONFIGDIR:-$${XDG_CACHE_HOME:-$$HOME/.cache}/matplotlib}
fonts:
	@missing() { echo '$(FONT_FAMILIES)' | tr '|' '\n' | while read -r f; do \
	  fc-list : family 2>/dev/null | grep -qF "$$f" || printf '%s; ' "$$f"; done; }; \
	if [ -n "$$(missing)" ]; then \
	  if [ "$$(id -u)" = 0 ]; then \
	    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $(FONT_PKGS) >/dev/null; \
	    fc-cache -f >/dev/null 2>&1; rm -f $(MPL_CACHE)/fontlist-*.json; \
	  else echo "note: install $(FONT_PKGS) (as root) so plots render non-Latin labels"; fi; \
	fi; \
	if [ -n "$$(missing)" ]; then echo "warning: no font for: $$(missing)plots show boxes for those labels"; \
	else echo "fonts: one for every script ($(FONT_FAMILIES))"; fi

browser:
	@if [ ! -x /usr/bin/chromium ] || [ ! -x /usr/bin/chromedriver ]; then \
	  if [ "$$(id -u)" = 0 ]; then \
	    (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $(BROWSER_PKGS) >/dev/null) \
	      || echo "warning: could not install $(BROWSER_PKGS); the browser tests will be skipped"; \
	  else echo "note: install $(BROWSER_PKGS) (as root) to run the review-UI browser tests"; fi; \
	fi

# The whole pipeline offline on a generated world (the stages of pipeline/stages.py -> release
# -> evaluator).
demo: $(VENV)/.installed
	$(VENV)/bin/python -m pipeline.demo

# The evaluator alone on the bundled synthetic release (python -m benchmark.synthetic made it).
synthetic: $(VENV)/.installed
	$(VENV)/bin/python -m benchmark run --model hash --task 3xcm --task 3xcm-i2i \
	  --dataset data/synthetic-3xcm --output-dir results

test: $(VENV)/.installed $(LSVENV)/.installed $(I2DVENV)/.installed fonts browser
	$(VENV)/bin/python -m pytest

lint: $(VENV)/.installed
	$(VENV)/bin/ruff check .

bench: $(VENV)/.installed $(I2DVENV)/.installed
	for f in tests/perf/bench_*.py; do echo "== $$f"; $(VENV)/bin/python $$f || exit 1; done
