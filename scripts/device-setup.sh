#!/usr/bin/env bash
# Source this on the GPU machine (the device tool) from the repository root:
#   . scripts/device-setup.sh
# It installs the carried wheels (.whl, made by scripts/device-wheels.sh) and this package,
# and records the GPU. The tests' data is in the repository (tests/data).
# That machine has torch, transformers, cupy and nvcc but no internet.
export OUT=${OUT:-$PWD/.device-out}
mkdir -p "$OUT"
export PYTHONUNBUFFERED=1
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
  --target /tmp/site .whl/*.whl $(ls .whl-nvim/*.whl 2>/dev/null) || return 1
export PYTHONPATH=/tmp/site PATH=/tmp/site/bin:$PATH
python3 -m pip install -q --no-index --no-deps --no-build-isolation -e . >"$OUT/install.log" 2>&1 \
  || { cat "$OUT/install.log"; return 1; }
nvidia-smi >"$OUT/nvidia-smi.txt" 2>&1
python3 -c 'import torch, cupy; print("torch", torch.__version__, "cuda", torch.version.cuda, torch.cuda.get_device_name(0), "cupy", cupy.__version__)'
