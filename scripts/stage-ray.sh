#!/usr/bin/env bash
# Stage Ray for the GPU machine (run here, where PyPI is reachable) into .device-ray/:
#   bash scripts/stage-ray.sh [PYTHON_VERSION]        (default 3.12: the GPU machine's python3)
# Ray's wheel (ray 2.60.0, the version the tests run: 79 MB) is more than one device call
# carries (64 MiB with the tree), so it is unpacked and what a local judge cluster never
# loads is left out: the Java jars, the dashboard's web client, the libraries built on Ray
# (rllib, data, serve, tune, train, llm) and test folders. What stays (the raylet, the GCS
# server, _raylet.so, ray.util, ray.dashboard's Python agent) is packed as one tar.xz, split
# into parts of 60 MiB should it ever grow past that. Ray's own needs travel as wheels; the
# device script installs only those the machine lacks.
# Then scripts/device-ray-bench.sh runs there; this prints the size of what the call carries.
set -euo pipefail
cd "$(dirname "$0")/.."
py=${1:-3.12}
tag=cp${py/./}
version=2.60.0
python=${PYTHON:-python3}
stage=.device-ray
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
step() { echo "stage-ray: $*"; }
fail() { echo "stage-ray: FAILED: $*" >&2; exit 1; }

rm -rf "$stage" && mkdir -p "$stage/wheels"
# dice-lsp's own wheels that the GPU machine lacks (.whl, installed by scripts/device-setup.sh).
[ -d .whl ] || bash scripts/device-wheels.sh >/dev/null || fail "scripts/device-wheels.sh"
download() {
  "$python" -m pip download -q --no-deps --only-binary=:all: --python-version "$py" --implementation cp \
    --platform manylinux2014_x86_64 --platform manylinux_2_17_x86_64 --platform manylinux_2_28_x86_64 \
    -d "$1" "${@:2}"
}
step "downloading ray==$version for CPython $py"
download "$work" "ray==$version" || fail "download of ray==$version ($tag)"
wheel=$(ls "$work"/ray-"$version"-"$tag"-*.whl) || fail "no $tag wheel of ray $version"
step "trimming $(basename "$wheel") ($(du -b "$wheel" | cut -f1) bytes)"
mkdir "$work/site"
"$python" -m zipfile -e "$wheel" "$work/site" || fail "unpacking $wheel"
(cd "$work/site" && rm -rf ray/jars ray/rllib ray/data ray/serve ray/tune ray/train ray/llm \
   ray/dashboard/client/build ray/air/examples \
 && find ray -type d \( -name tests -o -name test -o -name examples \) -prune -exec rm -rf {} + \
 && chmod +x ray/core/src/ray/raylet/raylet ray/core/src/ray/gcs/gcs_server) || fail "trimming"
step "packing (xz, about a minute)"
tar -C "$work/site" -cf - . | xz -6 -T0 > "$work/ray.tar.xz" || fail "packing"
split -b 60M -d "$work/ray.tar.xz" "$stage/ray-$version-$tag.tar.xz.part"
step "ray's own needs, as wheels"
for pkg in click filelock jsonschema jsonschema-specifications referencing rpds-py attrs msgpack packaging \
           protobuf pyyaml requests idna urllib3 certifi charset-normalizer; do
  download "$stage/wheels" "$pkg" || fail "download of $pkg"
done
echo "$version $tag" > "$stage/VERSION"
tree=$(git ls-files -z | xargs -0 du -cb 2>/dev/null | tail -1 | cut -f1)
carried=$(du -scb "$stage" .whl | tail -1 | cut -f1)
step "$stage and .whl: $carried bytes; the tracked tree: $tree bytes; together $((tree + carried)) of 67108864"
if [ $((tree + carried)) -gt 67108864 ]; then
  model=$(du -cb engine/builtin/*.safetensors | tail -1 | cut -f1)
  step "over the limit: the bench with --solutions loads no model, so move engine/builtin/*.safetensors"
  step "($model bytes) out of the checkout for the call and back after it"
fi
