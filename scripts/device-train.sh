#!/usr/bin/env bash
# Train the built-in model on the device machine, one command at a time (a device command may
# run 10 minutes; the settings' budget_seconds can be longer):
#   [SETTINGS=FILE] scripts/device-train.sh SECONDS
# trains SECONDS in this call (SETTINGS: default engine/builtin/train_settings.json). The first
# call unpacks the corpus carried as texts in
# .train-carry/corpus.tar.xz (training/corpus/build_corpus.py's output is too large for the device's
# 64 MiB tree; the line arrays are rebuilt there with --reindex) and starts from the settings'
# `init`; a later call on the same warm machine resumes from .train-run/train_state.pt. Every
# call copies the checkpoint and the loss log to $OUT.
# The corpus must be built with the model's tokenizer (`python -m training.corpus.build_corpus --tokenizer engine/builtin`; training.train
# refuses an `init` whose vocabulary differs). Made on this machine with (xz -9e: the corpus of 2026-12-04 (d309e49) is 5.3 MB at the
# default preset, 4.9 MB so, and the tree with the shipped weights must stay under 64 MiB):
#   python -c "import lzma, tarfile; t = tarfile.open('.train-carry/corpus.tar.xz', 'w:xz',
#              preset=9 | lzma.PRESET_EXTREME); [t.add(p) for p in ('.corpus/tokenizer',
#              '.corpus/data/train_texts.json', '.corpus/data/valid_texts.json',
#              '.corpus/data/test_texts.json')]"
# What comes back: $OUT/checkpoint (config, index, weight shards: the tokenizer is the init's,
# copy engine/builtin's tokenizer*.json beside it), $OUT/loss.csv and $OUT/logs.tar.gz with every
# log of the call (the device tool brings back at most 8 files: ddfa71a's first call lost its
# checkpoint to ten). Logs are written to DEVICE_LOGS (default /tmp/device-logs); any other file
# left in $OUT (scripts/device-setup.sh's) is moved there before the logs are packed.
set -euo pipefail
seconds=${1:?seconds of training in this call}
out=${OUT:-.device-out}
logs=${DEVICE_LOGS:-/tmp/device-logs}
mkdir -p "$out" "$logs"
if [ ! -f .corpus/data/train_lines.npy ]; then
  python3 -c "import tarfile; tarfile.open('.train-carry/corpus.tar.xz').extractall('.')"
  python3 -m training.corpus.build_corpus --reindex
fi
resume=()
[ -f .train-run/train_state.pt ] && resume=(--resume)
nvidia-smi --query-gpu=name,memory.used,memory.total --format=csv >> "$logs/train.log" 2>&1 || true
python3 -m training.train --settings "${SETTINGS:-engine/builtin/train_settings.json}" --out .train-run "${resume[@]}" \
  --stop-after "$seconds" 2>&1 | tee -a "$logs/train.log"
rm -rf "$out/checkpoint" && mkdir -p "$out/checkpoint"
cp .train-run/checkpoint/config.json .train-run/checkpoint/model*.safetensors* "$out/checkpoint/"
cp .train-run/loss.csv "$out/"
find "$out" -maxdepth 1 -type f ! -name loss.csv ! -name logs.tar.gz -exec mv {} "$logs/" \;
tar -czf "$out/logs.tar.gz" -C "$logs" .
echo "back: $(find "$out" -type f | wc -l) files (at most 8 come back)"
