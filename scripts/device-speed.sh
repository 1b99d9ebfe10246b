#!/usr/bin/env bash
# One device run (about 8 minutes on an H100): engine_speed.py for the three DICE shapes (skinny path, batch 1 and 8,
# the weight-read floor measured in the same run), preset_speed.py for DICE-4B at batches 32, 64, 128 with
# 4096-token answers (the dice preset, dynamic 0.9), and warm_start.py for DICE-1.7B (first and second process,
# the default path and the eager one). Logs and JSON under $OUT; each part has its own time limit.
OUT=${OUT:-$PWD/.device-out}; mkdir -p "$OUT"
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,memory.total,clocks.sm --format=csv > $OUT/gpu.txt
cat $OUT/gpu.txt
for s in 1.7b 4b 8b
do timeout 95 python3 benchmarks/engine_speed.py --shape $s --paths skinny --gen 64 --skip-transformers --skip-presets --skip-agreement --skip-kernels --budget-s 60 > $OUT/engine_speed-$s.log 2>&1
echo "== engine_speed $s rc=$?"
grep -E "floor|^\| skinny" $OUT/engine_speed-$s.log | tail -3
done
timeout 110 python3 benchmarks/preset_speed.py --shape 4b --settings "dice dynamic 0.9" --gen 4096 --batches 32,64,128 --repeats 1 > $OUT/preset_speed.log 2>&1
echo "== preset rc=$?"
tail -7 $OUT/preset_speed.log
timeout 130 python3 benchmarks/warm_start.py --shape 1.7b --paths default,cached --processes 2 --tokens 16 > $OUT/warm_start-1.7b.log 2>&1
echo "== warm rc=$?"
tail -6 $OUT/warm_start-1.7b.log
