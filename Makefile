PYTHON ?= python3
VENV   ?= .venv
# On this machine torch==2.13.0 is a CPU wheel read from local disk (no big download).
# With a GPU: `make test TORCH=torch` (or any pip spec, e.g. TORCH="torch>=2.4").
TORCH  ?= torch==2.13.0

STAMP := $(VENV)/.installed
ROOT_FLAG := $(if $(filter 0,$(shell id -u)),--allow-root,)

.PHONY: install test lab lint clean

install: $(STAMP)

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(VENV)/bin/python -m pip install --upgrade pip
	$(VENV)/bin/python -m pip install "$(TORCH)"
	$(VENV)/bin/python -m pip install -e ".[test]"
	touch $@

test: $(STAMP)
	$(VENV)/bin/ruff check jupyter_gpuiter tests
	$(VENV)/bin/python -m pytest -q -n auto

lab: $(STAMP)
	$(VENV)/bin/jupyter lab --ip=127.0.0.1 --no-browser --ServerApp.root_dir=examples $(ROOT_FLAG)

lint: $(STAMP)
	$(VENV)/bin/ruff check jupyter_gpuiter tests

clean:
	rm -rf $(VENV) build dist *.egg-info .pytest_cache .hypothesis .ruff_cache
	find . -name __pycache__ -type d -prune -exec rm -rf {} +
