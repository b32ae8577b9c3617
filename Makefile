# Set-up and entry points. Each target installs what it needs (idempotent; stamps in the venvs).
#   make demo   set up .venv and run the main job on its embedded default
#   make test   set up .venv, Label Studio's own .venv-ls, the fonts and the browser, then run
#               the tests
PY ?= python3
VENV := .venv
LSVENV := .venv-ls
PIP := $(VENV)/bin/pip
# Debian fonts so plots render Thai, Devanagari, Arabic and CJK labels.
FONT_PKGS := fonts-noto-core fonts-noto-cjk
# Debian's Chromium and its driver for the review-UI tests in a real browser
# (tests/annotation/test_browser.py; Selenium uses /usr/bin/chromedriver, downloads nothing).
BROWSER_PKGS := chromium chromium-driver

.PHONY: demo synthetic test setup setup-ls fonts browser lint bench

$(VENV)/.installed: pyproject.toml
	$(PY) -m venv $(VENV)
	$(PIP) install -q --upgrade pip
	$(PIP) install -q -e '.[all,dev]'
	touch $@

# label-studio 1.23 pins pyarrow<25, pytz<2023, openai<2, Django 5.2: it gets its own venv.
$(LSVENV)/.installed:
	$(PY) -m venv $(LSVENV)
	$(LSVENV)/bin/pip install -q --upgrade pip
	$(LSVENV)/bin/pip install -q 'label-studio==1.23.*'
	touch $@

setup: $(VENV)/.installed
setup-ls: $(LSVENV)/.installed

fonts:
	@if ! fc-list 2>/dev/null | grep -qi 'NotoSansThai'; then \
	  if [ "$$(id -u)" = 0 ]; then \
	    (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $(FONT_PKGS) >/dev/null) \
	      || echo "warning: could not install $(FONT_PKGS); plots may show boxes for non-Latin labels"; \
	  else echo "note: install $(FONT_PKGS) (as root) so plots render non-Latin labels"; fi; \
	fi

browser:
	@if [ ! -x /usr/bin/chromium ] || [ ! -x /usr/bin/chromedriver ]; then \
	  if [ "$$(id -u)" = 0 ]; then \
	    (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $(BROWSER_PKGS) >/dev/null) \
	      || echo "warning: could not install $(BROWSER_PKGS); the browser tests will be skipped"; \
	  else echo "note: install $(BROWSER_PKGS) (as root) to run the review-UI browser tests"; fi; \
	fi

# The whole pipeline offline on a generated world (builder stages -> release -> evaluator).
demo: $(VENV)/.installed
	$(VENV)/bin/python -m builder.demo

# The evaluator alone on the bundled synthetic release (python -m benchmark.synthetic made it).
synthetic: $(VENV)/.installed
	$(VENV)/bin/python -m benchmark run --model hash --task 3xcm --task 3xcm-i2i \
	  --dataset data/synthetic-3xcm --output-dir results

test: $(VENV)/.installed $(LSVENV)/.installed fonts browser
	$(VENV)/bin/python -m pytest

lint: $(VENV)/.installed
	$(VENV)/bin/ruff check .

bench: $(VENV)/.installed
	for f in tests/perf/bench_*.py; do echo "== $$f"; $(VENV)/bin/python $$f || exit 1; done
