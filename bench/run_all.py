"""Run every benchmark and print their JSON results (``make bench``)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
BENCHES = ["bench.bench_ordinal", "bench.bench_diversity", "bench.bench_karma"]


def main() -> int:
    failed = 0
    for module in BENCHES:
        print(f"== {module}", flush=True)
        failed |= subprocess.call([sys.executable, "-m", module, *sys.argv[1:]], cwd=ROOT)
    return failed


if __name__ == "__main__":
    raise SystemExit(main())
