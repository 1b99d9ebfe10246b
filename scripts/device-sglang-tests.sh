#!/usr/bin/env bash
# SGLang's contract tests on the GPU machine, in one device call (repository root):
#   bash scripts/device-sglang-tests.sh
# with .whl and .device-sglang carried (scripts/stage-sglang.sh makes them). Steps, each named
# on its line and, when it fails, in a line `device-sglang-tests: FAILED at STEP`:
# 1. setup: dice-lsp's wheels and the package (scripts/device-setup.sh);
# 2. sglang: SGLang 0.5.23 unpacked into /tmp/site, and the wheels its modules need that this
#    machine lacks;
# 3. import: each SGLang module the tests import, with this machine's torch (a failure names
#    the module and the error);
# 4. tests: tests/engine/serving/test_sglang_client.py, LowConfidence on CPU and on GPU
#    tensors included; none may skip.
# $OUT gets device-sglang-tests.log and sglang-tests.xml (JUnit).
set -uo pipefail
python=${PYTHON:-python3}
export OUT=${OUT:-$PWD/.device-out}
mkdir -p "$OUT"
log=$OUT/device-sglang-tests.log
exec > >(tee -a "$log") 2>&1
start=$(date +%s)
step() { echo "device-sglang-tests: [$(( $(date +%s) - start )) s] $*"; }
fail() { step "FAILED at $*"; exit 1; }

step "setup"
. scripts/device-setup.sh || fail "setup (scripts/device-setup.sh: the wheels in .whl or the package)"
read -r version tag < .device-sglang/VERSION || fail "sglang: .device-sglang/VERSION missing (run scripts/stage-sglang.sh here)"
here=$("$python" -c 'import sys; print(f"cp{sys.version_info[0]}{sys.version_info[1]}")')
[ "$here" = "$tag" ] || fail "sglang: staged for $tag, this python is $here"

step "sglang: unpacking sglang $version ($tag)"
xz -dc .device-sglang/sglang-"$version"-"$tag".tar.xz | tar -x -C /tmp/site || fail "sglang: unpacking"
step "sglang: installing the wheels its modules need that this machine lacks"
"$python" scripts/install_missing.py .device-sglang/wheels /tmp/site || fail "sglang: installing its needs"

step "import"
timeout 300 "$python" - <<'PY' || fail "import (the module and error above)"
import sys, traceback
import torch
print("python", sys.version.split()[0], "torch", torch.__version__, "cuda", torch.cuda.is_available())
failed = False
for module in ("sglang.srt.entrypoints.api_contract", "sglang.srt.managers.io_struct",
               "sglang.srt.managers.schedule_batch", "sglang.srt.sampling.sampling_params",
               "sglang.srt.utils.json_response", "sglang.srt.dllm.algorithm", "sglang.srt.dllm.config",
               "sglang.srt.server_args"):
    try:
        __import__(module)
        print("imported", module)
    except Exception:
        failed = True
        print("cannot import", module)
        traceback.print_exc(limit=-3)
import sglang
print("sglang", sglang.__version__, sglang.__file__)
sys.exit(1 if failed else 0)
PY

step "tests"
timeout 300 "$python" -m pytest -q -rs -p no:cacheprovider tests/engine/serving/test_sglang_client.py \
  --junitxml="$OUT/sglang-tests.xml"
rc=$?
[ $rc -eq 0 ] || fail "tests (pytest rc $rc)"
skipped=$("$python" -c "import sys, xml.etree.ElementTree as t; r=t.parse(sys.argv[1]).getroot(); \
s=r if r.tag=='testsuite' else r[0]; print(s.get('skipped'))" "$OUT/sglang-tests.xml")
[ "$skipped" = "0" ] || fail "tests: $skipped skipped (the reasons are above)"
step "done: every contract test ran against SGLang's own classes, none skipped"
