#!/usr/bin/env bash
# The trainers' own code that the trainer-hook tests drive on CPU (issue 22), installed into the
# project's virtualenv WITHOUT their dependencies: OpenRLHF's requirements pin GPU packages
# (deepspeed, flash-attn, vLLM) and versions of transformers that would replace ours, but its
# agent loader and MultiTurnAgentExecutor need only torch, transformers, aiohttp and sympy
# (already here) and pylatexenc. Usage: scripts/install_trainers.sh [PYTHON]
set -euo pipefail
PYTHON="${1:-.venv/bin/python}"
"$PYTHON" -m pip install --quiet --no-deps 'openrlhf==0.11.2' 'pylatexenc>=2.10'
