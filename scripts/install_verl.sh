#!/usr/bin/env bash
# verl 0.9.1 and Ray (CPU wheel) in a virtualenv of their own, for the tests that run verl's
# reward-loop managers on a local Ray cluster (issue 22). verl pins transformers<5.11 and
# tensordict<=0.10, and Ray brings its own protobuf; installing them into the project's
# virtualenv would replace packages the project runs on. This venv sees the project's
# virtualenv through a .pth file (torch, transformers, numpy, ... come from there) and holds only
# what verl's reward loop imports on top, each pinned and installed without dependencies.
# About 320 MB; a minute on a warm pip cache.
# Usage: scripts/install_verl.sh [PROJECT_PYTHON] [VENV_DIR]
# Tests find it at ~/.cache/plaudit-verl-venv or $PLAUDIT_TEST_VERL_PYTHON.
set -euo pipefail
PYTHON="${1:-.venv/bin/python}"
VENV="${2:-$HOME/.cache/plaudit-verl-venv}"
BASE=$("$PYTHON" -c 'import sys; print(sys.base_prefix)')
PROJECT_SITE=$("$PYTHON" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
PY_VERSION=$("$PYTHON" -c 'import sys; print(f"{sys.version_info[0]}.{sys.version_info[1]}")')

test -x "$VENV/bin/python" || "$BASE/bin/python$PY_VERSION" -m venv "$VENV"
SITE=$("$VENV/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
echo "$PROJECT_SITE" > "$SITE/plaudit-project-venv.pth"
"$VENV/bin/python" -m pip install --quiet --no-deps \
  'verl==0.9.1' 'ray==2.60.0' 'msgpack==1.2.4' 'protobuf==7.36.2' 'tensordict==0.10.0' \
  'pyvers==0.2.3' 'importlib_metadata==10.2.0' 'omegaconf==2.4.0' 'hydra-core==1.3.8' \
  'antlr4-python3-runtime==4.9.3' 'codetiming==1.4.0' 'orjson==3.13.0' 'pillow==13.0.0' \
  'cachetools==8.0.2'
# The verl wheel also ships top-level `tests` and `scripts` packages (verl's own): remove them
# so that they can never shadow this repository's.
for pkg in tests scripts; do
  if [ -d "$SITE/$pkg" ] && grep -qs "^$pkg/" "$SITE"/verl-*.dist-info/RECORD; then
    rm -rf "${SITE:?}/$pkg"
  fi
done
# Tests run under this venv start the project's server as `<venv>/bin/plaudit`.
ln -sf "$(cd "$(dirname "$PYTHON")" && pwd)/plaudit" "$VENV/bin/plaudit"
"$VENV/bin/python" -c 'import ray, verl.experimental.reward_loop.reward_loop' \
  || { echo "verl's reward loop does not import in $VENV" >&2; exit 1; }
