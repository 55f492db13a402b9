# foldwise developer entry points. Two matter: `make demo` and `make test`.
# Both create the virtual environment from the committed uv.lock when it is missing.

PYTHON ?= python3
UV := $(shell command -v uv 2>/dev/null)
ifeq ($(UV),)
UV := $(PYTHON) -m uv
endif
VENV := .venv
STAMP := $(VENV)/.foldwise-installed
# The JS SDK conformance test (tests/test_sdk_conformance.py) uses tests/js/node_modules.
JS_DIR := tests/js
JS_STAMP := $(JS_DIR)/node_modules/.foldwise-installed
# The agent-chat-ui browser test (tests/test_agent_chat_ui.py) builds the UI from
# tests/browser/node_modules; it runs in Chromium at /usr/bin/chromium (.ci/run installs it).
BROWSER_DIR := tests/browser
BROWSER_STAMP := $(BROWSER_DIR)/node_modules/.foldwise-installed

.PHONY: demo test lint format typecheck pytest bench install install-js clean screenshots

$(STAMP): pyproject.toml uv.lock
	@$(UV) --version >/dev/null 2>&1 || $(PYTHON) -m pip install --quiet uv
	$(UV) sync --frozen --all-extras
	@touch $(STAMP)

install: $(STAMP)

# npm ci from the committed lock file (npm's cache makes repeats fast), for tests/js and
# tests/browser; without npm the tests that need them skip and say why.
tests/%/node_modules/.foldwise-installed: tests/%/package.json tests/%/package-lock.json
	@if command -v npm >/dev/null 2>&1 && command -v node >/dev/null 2>&1; then \
		npm ci --prefix tests/$* --prefer-offline --no-audit --no-fund && touch $@; \
	else \
		echo "node/npm not found: the tests using tests/$* will be skipped"; \
	fi

install-js: $(JS_STAMP) $(BROWSER_STAMP)

demo: $(STAMP)
	$(UV) run --frozen foldwise demo

lint: $(STAMP)
	$(UV) run --frozen ruff check src tests bench
	$(UV) run --frozen ruff format --check src tests bench
	$(UV) run --frozen lint-imports --no-cache

typecheck: $(STAMP)
	$(UV) run --frozen mypy

pytest: $(STAMP) $(JS_STAMP) $(BROWSER_STAMP)
	$(UV) run --frozen pytest -q

test: lint typecheck pytest

format: $(STAMP)
	$(UV) run --frozen ruff format src tests bench
	$(UV) run --frozen ruff check --fix src tests bench

# Refresh the committed screenshots in docs/img (web page and agent-chat-ui) from the browser tests.
screenshots: $(STAMP) $(BROWSER_STAMP)
	FOLDWISE_WRITE_SCREENSHOTS=1 $(UV) run --frozen pytest -q -m browser tests/test_web_ui.py tests/test_agent_chat_ui.py

bench: $(STAMP)
	$(UV) run --frozen foldwise bench

clean:
	rm -rf $(VENV) .mypy_cache .pytest_cache .ruff_cache
