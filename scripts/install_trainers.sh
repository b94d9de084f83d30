#!/usr/bin/env bash
# The trainers' own code that the trainer-hook tests drive on CPU (issue 22), installed into the
# project's virtualenv WITHOUT their dependencies: OpenRLHF's requirements pin GPU packages
# (deepspeed, flash-attn, vLLM) and versions of transformers that would replace ours, but its
# agent loader and MultiTurnAgentExecutor need only torch, transformers, aiohttp and sympy
# (already here) and pylatexenc. Usage: scripts/install_trainers.sh [PYTHON]
set -euo pipefail
PYTHON="${1:-.venv/bin/python}"
"$PYTHON" -m pip install --quiet --no-deps 'openrlhf==0.11.2' 'pylatexenc>=2.10'
# The OpenRLHF wheel also installs a top-level `tests` package into site-packages, which could
# shadow this repository's own `tests` package wherever the repository root is not first on
# sys.path: remove it (it is OpenRLHF's test suite, not part of its library).
SITE=$("$PYTHON" -m pip show openrlhf | sed -n "s/^Location: //p")
if [ -d "$SITE/tests" ] && grep -rqs "openrlhf" "$SITE/tests" 2>/dev/null; then rm -rf "$SITE/tests"; fi
# verl and Ray, in a virtualenv of their own (their pins would replace ours): see the script.
bash "$(dirname "$0")/install_verl.sh" "$PYTHON"
