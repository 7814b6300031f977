PYTHON ?= python3
VENV   ?= .venv
# On this machine torch==2.13.0 is a CPU wheel read from local disk (no big download).
# With a GPU: `make test TORCH=torch` (or any pip spec, e.g. TORCH="torch>=2.4").
TORCH  ?= torch==2.13.0
# The browser tests drive Debian's Chromium (Playwright's own browser download is not used).
CHROMIUM ?= /usr/bin/chromium

STAMP := $(VENV)/.installed
ROOT_FLAG := $(if $(filter 0,$(shell id -u)),--allow-root,)
SUDO := $(if $(filter 0,$(shell id -u)),,sudo)
# The JupyterLab extension (labextension/, TypeScript): `pip install -e` builds it (hatch-jupyter-builder) into
# jupyter_gpuiter/labextension, which `jupyter-builder develop` links into the venv; rebuilt when its sources change.
LABEXT_SRC := labextension/package.json labextension/tsconfig.json labextension/yarn.lock \
              $(wildcard labextension/src/*.ts labextension/style/*)
LABEXT_OUT := jupyter_gpuiter/labextension/package.json

.PHONY: install labextension chromium test lab lint clean

install: $(STAMP)

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(VENV)/bin/python -m pip install --upgrade pip
	$(VENV)/bin/python -m pip install "$(TORCH)"
	$(VENV)/bin/python -m pip install -e ".[test]"
	$(VENV)/bin/jupyter-builder develop --overwrite .
	touch $@

labextension: $(LABEXT_OUT)

# (pip install -e has usually just built it: rebuild only when a source is newer than the output)
$(LABEXT_OUT): $(LABEXT_SRC) | $(STAMP)
	@if [ ! -e $@ ] || [ -n "$$(find $(LABEXT_SRC) -newer $@)" ]; then \
	  echo "building labextension/"; \
	  cd labextension && PATH="$(abspath $(VENV))/bin:$$PATH" jlpm install && PATH="$(abspath $(VENV))/bin:$$PATH" jlpm build; \
	fi
	touch $@

chromium: $(CHROMIUM)

$(CHROMIUM):
	$(SUDO) apt-get update -q
	$(SUDO) env DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends chromium

test: $(STAMP) labextension chromium
	$(VENV)/bin/ruff check jupyter_gpuiter tests
	@# numba builds the fused evaluator once into its disk cache, so the test workers only load it
	$(VENV)/bin/python -c "from jupyter_gpuiter.runtime import fused; fused.warm_up()"
	$(VENV)/bin/python -m pytest -q -n auto

lab: $(STAMP) labextension
	$(VENV)/bin/jupyter lab --ip=127.0.0.1 --no-browser --ServerApp.root_dir=examples $(ROOT_FLAG)

lint: $(STAMP)
	$(VENV)/bin/ruff check jupyter_gpuiter tests

clean:
	rm -rf $(VENV) build dist *.egg-info .pytest_cache .hypothesis .ruff_cache
	rm -rf labextension/node_modules labextension/lib labextension/.yarn labextension/tsconfig.tsbuildinfo \
	       jupyter_gpuiter/labextension
	find . -name __pycache__ -type d -prune -exec rm -rf {} +
