#!/usr/bin/env bash
# Train the built-in model on the device machine, one command at a time (a device command may
# run 10 minutes; the settings' budget_seconds can be longer):
#   [SETTINGS=FILE] scripts/device-train.sh SECONDS
# trains SECONDS in this call (SETTINGS: default engine/builtin/train_settings.json). The first
# call unpacks the corpus carried as texts in
# .train-carry/corpus.tar.xz (scripts/build_corpus.py's output is too large for the device's
# 64 MiB tree; the line arrays are rebuilt there with --reindex) and starts from the settings'
# `init`; a later call on the same warm machine resumes from .train-run/train_state.pt. Every
# call copies the checkpoint and the loss log to $OUT.
# The corpus must be built with the model's tokenizer (`build_corpus.py --tokenizer engine/builtin`; engine.train
# refuses an `init` whose vocabulary differs). Made on this machine with (xz -9e: the corpus of 2026-12-04's session 16 is 5.3 MB at the
# default preset, 4.9 MB so, and the tree with the shipped weights must stay under 64 MiB):
#   python -c "import lzma, tarfile; t = tarfile.open('.train-carry/corpus.tar.xz', 'w:xz',
#              preset=9 | lzma.PRESET_EXTREME); [t.add(p) for p in ('.corpus/tokenizer',
#              '.corpus/data/train_texts.json', '.corpus/data/valid_texts.json',
#              '.corpus/data/test_texts.json')]"
set -euo pipefail
seconds=${1:?seconds of training in this call}
out=${OUT:-.device-out}
mkdir -p "$out"
if [ ! -f .corpus/data/train_lines.npy ]; then
  python3 -c "import tarfile; tarfile.open('.train-carry/corpus.tar.xz').extractall('.')"
  python3 scripts/build_corpus.py --reindex
fi
resume=()
[ -f .train-run/train_state.pt ] && resume=(--resume)
nvidia-smi --query-gpu=name,memory.used,memory.total --format=csv >> "$out/train.log" 2>&1 || true
python3 -m engine.train --settings "${SETTINGS:-engine/builtin/train_settings.json}" --out .train-run "${resume[@]}" \
  --stop-after "$seconds" 2>&1 | tee -a "$out/train.log"
mkdir -p "$out/checkpoint"
cp .train-run/checkpoint/* "$out/checkpoint/"
cp .train-run/loss.csv "$out/"
