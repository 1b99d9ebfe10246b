#!/usr/bin/env bash
# `dice bench` on the GPU machine: the GPU tests of tests/dice_lsp/bench (controls judged by a real
# `dice bench` run whose tables are printed as a user sees them, agreement with
# `dice profile`, a wrong-only problem, the built-in model). From the repository root:
#
#   . scripts/device-setup.sh && bash benchmarks/kernelbench_controls/run_gpu.sh [PYTEST -k EXPR]
#
# Writes $OUT/bench/bench.log, $OUT/bench/{controls,builtin}-{results.json,speedups.png}.
set -uo pipefail
OUT=${OUT:-$PWD/.device-out}
mkdir -p "$OUT/bench"
LOG="$OUT/bench/bench.log"
export PYTHONUNBUFFERED=1
{
  echo "== $(date -u) $(nvidia-smi -L 2>&1 | head -1)"
  echo "== pytest -m gpu tests/dice_lsp/bench ${1:+-k \"$1\"}"
  python3 -m pytest -m gpu tests/dice_lsp/bench -v -s -p no:cacheprovider ${1:+-k "$1"}
  status=$?
  echo "== pytest exit status $status"
  exit $status
} 2>&1 | tee "$LOG"
