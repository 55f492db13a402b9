# foldwise developer entry points. Two matter: `make demo` and `make test`.
# Both create the virtual environment from the committed uv.lock when it is missing.

PYTHON ?= python3
UV := $(shell command -v uv 2>/dev/null)
ifeq ($(UV),)
UV := $(PYTHON) -m uv
endif
VENV := .venv
STAMP := $(VENV)/.foldwise-installed

.PHONY: demo test lint format typecheck pytest bench install clean

$(STAMP): pyproject.toml uv.lock
	@$(UV) --version >/dev/null 2>&1 || $(PYTHON) -m pip install --quiet uv
	$(UV) sync --frozen --all-extras
	@touch $(STAMP)

install: $(STAMP)

demo: $(STAMP)
	$(UV) run --frozen foldwise demo

lint: $(STAMP)
	$(UV) run --frozen ruff check src tests bench
	$(UV) run --frozen ruff format --check src tests bench
	$(UV) run --frozen lint-imports --no-cache

typecheck: $(STAMP)
	$(UV) run --frozen mypy

pytest: $(STAMP)
	$(UV) run --frozen pytest -q

test: lint typecheck pytest

format: $(STAMP)
	$(UV) run --frozen ruff format src tests bench
	$(UV) run --frozen ruff check --fix src tests bench

bench: $(STAMP)
	$(UV) run --frozen foldwise bench

clean:
	rm -rf $(VENV) .mypy_cache .pytest_cache .ruff_cache
