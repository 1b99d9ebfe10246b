#!/usr/bin/env bash
# Download Ray and what it needs beyond the GPU machine's packages into .whl-ray/ (CPython
# 3.12, x86-64 Linux), for benchmarks/ray_vs_local.py there; install with
#   python3 -m pip install -q --no-index --no-deps --target /tmp/site .whl-ray/*.whl
# It prints the size: what a device call carries (tree, .whl, .whl-ray) must stay under 64 MiB,
# and Ray's wheel alone is larger than that (ray 2.60.0: 79.3 MB).
set -euo pipefail
cd "$(dirname "$0")/.."
rm -rf .whl-ray && mkdir -p .whl-ray
for pkg in ray==2.60.0 click filelock jsonschema jsonschema-specifications referencing rpds-py attrs \
           protobuf pyyaml requests idna urllib3 certifi charset-normalizer; do
  python3 -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
    --platform manylinux2014_x86_64 --platform manylinux_2_17_x86_64 --platform manylinux_2_28_x86_64 \
    -d .whl-ray "$pkg"
done
du -sb .whl-ray
