#!/usr/bin/env bash
# Stage SGLang's contract tests for the GPU machine (run here, where PyPI is reachable) into
# .device-sglang/:
#   bash scripts/stage-sglang.sh [PYTHON_VERSION]        (default 3.12: the GPU machine's python3)
# tests/engine/serving/test_sglang_client.py imports SGLang 0.5.23's request classes, its
# contract check, its server arguments and its LowConfidence algorithm. SGLang pins torch
# 2.14.1, so it travels without its dependencies, to run on the torch there (2.11): its wheel
# is unpacked and its compiled Rust extensions (_server, _bench, _grpc, _multimodal: loaded
# only by the Rust server, the benchmarks and multimodal processors, none of which the tests
# import), the diffusion image generator, its tests and benchmarks are left out. What the
# imported modules need travels as wheels: the sglang-contract extra of pyproject.toml and
# what those need, resolved by pip for that python, less what the GPU machine has for its
# torch (torch, triton, numpy, transformers, the CUDA wheels and their needs). The device
# script installs only those the machine lacks (scripts/device-sglang-tests.sh).
set -euo pipefail
cd "$(dirname "$0")/.."
py=${1:-3.12}
tag=cp${py/./}
python=${PYTHON:-python3}
stage=.device-sglang
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
step() { echo "stage-sglang: $*"; }
fail() { echo "stage-sglang: FAILED: $*" >&2; exit 1; }
# Resolved by `pip install --dry-run --report` for the sglang-contract extra (less torchvision,
# which comes with torch there) on CPython 3.12, x86-64 Linux.
needs=(
  aiohappyeyeballs==2.7.1 aiohttp==3.14.5 aiosignal==1.4.0 annotated-doc==0.0.7 annotated-types==0.8.0
  anyio==4.16.0 apache-tvm-ffi==0.1.11 asttokens==3.0.2 attrs==26.1.0 click==8.5.1 compressed-tensors==0.15.0.1
  dill==0.4.1 einops==0.8.2 executing==2.3.0 fastapi==0.165.0 frozenlist==1.8.0 gguf==0.19.0 h11==0.16.0
  httpcore2==2.17.0 httpx2==2.17.0 ipython==9.19.1 ipython_pygments_lexers==1.1.1 jedi==0.20.1 jiter==0.19.0
  loguru==0.8.0 markdown-it-py==4.3.0 matplotlib-inline==0.2.2 mdurl==0.1.2 msgspec==0.23.0 multidict==7.2.1
  openai==3.63.0 opentelemetry-api==1.45.3 orjson==3.13.0 parso==0.8.7 partial-json-parser==0.2.1.1.post7
  pexpect==4.9.0 prompt_toolkit==3.0.53 propcache==0.5.4 psutil==7.2.2 ptyprocess==0.7.0 pure_eval==0.2.4
  pybase64==1.5.1 pydantic==2.14.4 pydantic_core==2.50.5 Pygments==2.21.0 pyzmq==27.3.0 rich==15.0.0
  sentencepiece==0.2.3 shellingham==1.5.4 sniffio==1.3.1 stack-data==0.6.3 starlette==1.10.0 tomlkit==0.15.3
  traitlets==5.16.1 truststore==0.10.5 typer==0.29.3 typing-inspection==0.4.5 uvicorn==0.55.0 wcwidth==0.9.5
  yarl==1.25.1 pyyaml requests
)
download() {
  "$python" -m pip download -q --no-deps --only-binary=:all: --python-version "$py" --implementation cp \
    --platform manylinux_2_34_x86_64 --platform manylinux_2_28_x86_64 --platform manylinux_2_27_x86_64 \
    --platform manylinux_2_26_x86_64 --platform manylinux_2_24_x86_64 --platform manylinux2014_x86_64 \
    --platform manylinux_2_17_x86_64 --platform manylinux2010_x86_64 --platform manylinux1_x86_64 -d "$1" "${@:2}"
}
rm -rf "$stage" && mkdir -p "$stage/wheels"
[ -d .whl ] || bash scripts/device-wheels.sh >/dev/null || fail "scripts/device-wheels.sh"
step "downloading sglang==0.5.23 for CPython $py"
download "$work" sglang==0.5.23 || fail "download of sglang==0.5.23 ($tag)"
wheel=$(ls "$work"/sglang-0.5.23-*.whl)
step "trimming $(basename "$wheel") ($(du -b "$wheel" | cut -f1) bytes)"
mkdir "$work/site"
"$python" -m zipfile -e "$wheel" "$work/site" || fail "unpacking $wheel"
(cd "$work/site" && rm -rf sglang/srt/rust_extensions/*.so sglang/multimodal_gen sglang/test sglang/benchmark) \
  || fail "trimming"
tar -C "$work/site" -cf - . | xz -6 -T0 > "$stage/sglang-0.5.23-$tag.tar.xz" || fail "packing"
step "what its imported modules need, as wheels"
for pkg in "${needs[@]}"; do
  download "$stage/wheels" "$pkg" || fail "download of $pkg"
done
echo "0.5.23 $tag" > "$stage/VERSION"
tree=$(git ls-files -z | xargs -0 du -cb 2>/dev/null | tail -1 | cut -f1)
carried=$(du -scb "$stage" .whl | tail -1 | cut -f1)
step "$stage and .whl: $carried bytes; the tracked tree: $tree bytes; together $((tree + carried)) of 67108864"
if [ $((tree + carried)) -gt 67108864 ]; then
  step "over the limit: the contract tests load no model, so move engine/builtin/*.safetensors"
  step "($(du -cb engine/builtin/*.safetensors | tail -1 | cut -f1) bytes) out of the checkout for the call and back after it"
fi
