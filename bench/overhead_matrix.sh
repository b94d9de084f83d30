#!/usr/bin/env bash
# The overhead matrix of BENCHMARKS.md (issue 19), in one run: Plaudit in front of the stand-in
# judge (bench/stub_openai.py), with the judge's tokenizer known (batched /v1/completions, the
# set-up docs/models.md recommends for vLLM) and without it (one chat call per prompt), with
# one server process and with --workers N.
#
# --workers N needs Redis (the workers share the cache and limits through it): REDIS_URL.
#
#   PY=.venv/bin/python TOKENIZER=<HF dir with the judge's tokenizer> WORKERS=8 \
#     REDIS_URL=redis://127.0.0.1:6379/9 bash bench/overhead_matrix.sh overhead-out
set -uo pipefail
cd "$(dirname "$0")/.."
PY="${PY:-.venv/bin/python}"
OUT="${1:-overhead-out}"
TOKENIZER="${TOKENIZER:?set TOKENIZER to a local directory with the tokenizer of the judge}"
WORKERS="${WORKERS:-8}"
REDIS_URL="${REDIS_URL:?set REDIS_URL for the runs with several workers}"
SECONDS_PER_PHASE="${SECONDS_PER_PHASE:-2}"
mkdir -p "$OUT"

run() {
  local name=$1
  shift
  echo "== $name: $*"
  "$PY" -m bench.bench_overhead --seconds "$SECONDS_PER_PHASE" --out "$OUT/$name.json" "$@" \
    >"$OUT/$name.log" 2>&1
  grep '^|' "$OUT/$name.log" || tail -20 "$OUT/$name.log"
}

run batched-w1 --judges 50ms instant --env "PLAUDIT_JUDGE_TOKENIZER=$TOKENIZER"
run batched-w$WORKERS --judges 50ms --clients 64 256 --workers "$WORKERS" \
  --env "PLAUDIT_JUDGE_TOKENIZER=$TOKENIZER" --env "PLAUDIT_REDIS_URL=$REDIS_URL"
run chat-w1 --judges 50ms
run chat-w$WORKERS --judges 50ms --clients 64 256 --workers "$WORKERS" \
  --env "PLAUDIT_REDIS_URL=$REDIS_URL"
