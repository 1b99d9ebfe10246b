#!/usr/bin/env bash
# The judge's proof on the GPU machine, in one device call: honest controls judged by this
# checkout and by an earlier one (carried as .device-carry/old-COMMIT.tar.gz, made with
# `git archive COMMIT profiler dice_lsp engine ':!engine/builtin' | gzip`), then GPU tests.
#   . scripts/device-setup.sh && bash scripts/device-proof.sh [GPU TEST SECONDS] [PYTEST PATHS...]
set -uo pipefail
seconds=${1:-240}
shift || true
mkdir -p /tmp/old
old=$(ls .device-carry/old-*.tar.gz 2>/dev/null | head -1)
python3 benchmarks/controls_ab.py --out "$OUT/controls-new.json" 2>&1 | tee "$OUT/controls.log"
if [ -n "$old" ]; then
  tar -xzf "$old" -C /tmp/old
  PYTHONPATH=/tmp/old:$PYTHONPATH python3 benchmarks/controls_ab.py --out "$OUT/controls-old.json" 2>&1 \
    | sed 's/^/old: /' | tee -a "$OUT/controls.log"
fi
[ "$seconds" -gt 0 ] && bash scripts/device-gpu-tests.sh "$seconds" "$@"
