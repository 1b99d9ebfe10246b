#!/usr/bin/env bash
# Run the GPU tests on the device machine within one call, and keep what ran even when the
# call's time runs out: after `. scripts/device-setup.sh`, from the repository root,
#   scripts/device-gpu-tests.sh [SECONDS] [PYTEST ARGS...]
# Test files run side by side (one per worker, --dist loadfile), each test's line is written
# as it ends (-v), and pytest gets SIGINT, not SIGKILL, at SECONDS, so that it still prints
# the failures and the summary of what finished ($OUT/gpu-tests.log).
# Files side by side share the GPU: judging runs take turns on it (profiler/sandbox/gpu_turn.py),
# so past a few workers they mostly wait, and the engine's tests and the workers' memory take
# no turns. WORKERS (default 4) files run at a time; a timing-sensitive check that fails is
# re-run alone before it is believed: WORKERS=1 runs the files one at a time.
set -uo pipefail
seconds=${1:-480}
shift || true
paths=("$@")
[ ${#paths[@]} -gt 0 ] || paths=(tests/profiler tests/engine tests/dice_lsp)
workers=${WORKERS:-4}
parallel=(-n "$workers" --dist loadfile)
[ "$workers" -gt 1 ] || parallel=()
timeout -s INT "$seconds" python3 -m pytest -m gpu "${parallel[@]}" -p no:cacheprovider -p no:benchmark \
  --timeout 300 -v --tb=short -rfE --durations=15 "${paths[@]}" >"$OUT/gpu-tests.log" 2>&1
rc=$?
grep -E "^\[gw[0-9]+\].*(PASSED|FAILED|ERROR|SKIPPED)|::[^ ]+ (PASSED|FAILED|ERROR|SKIPPED)|^(FAILED|ERROR) |passed|failed" "$OUT/gpu-tests.log" \
  | sed -E 's/\[\\n.*-([a-z_]+)\]/[\1]/' | tail -60
exit $rc
