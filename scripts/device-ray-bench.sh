#!/usr/bin/env bash
# `dice bench --judge ray` proven on the GPU machine, in one device call (repository root):
#   bash scripts/device-ray-bench.sh [PROBLEMS]
# with .whl and .device-ray carried (scripts/stage-ray.sh makes them). Steps, each named
# on its line and, when it fails, in a line `device-ray-bench: FAILED at STEP`:
# 1. setup: dice-lsp's wheels and the package (scripts/device-setup.sh);
# 2. ray: the trimmed Ray unpacked into /tmp/site, and those of its needs the machine lacks;
# 3. import: Ray with this machine's python and torch, and a task run on a local cluster;
# 4. bench: benchmarks/ray_vs_local.py on PROBLEMS (stems of problems with controls: honest and
#    wrong ModelNew files): judged locally, then through a local Ray cluster, then through Ray
#    with a verdict worker killed, the run stopped and resumed; same statuses, and each
#    judge's candidates a minute.
# $OUT gets ray_vs_local.json, device-ray-bench.log and ray-bench.tar.gz (every run's
# results.json and stderr).
set -uo pipefail
# Two problems: four (7 candidates) took 264 s locally on an H100, and three runs of them do not
# fit in one 600 s call.
problems=${1:-19_ReLU,12_Gemm_Multiply_LeakyReLU}
python=${PYTHON:-python3}
export OUT=${OUT:-$PWD/.device-out}
mkdir -p "$OUT"
log=$OUT/device-ray-bench.log
exec > >(tee -a "$log") 2>&1
start=$(date +%s)
step() { echo "device-ray-bench: [$(( $(date +%s) - start )) s] $*"; }
fail() { step "FAILED at $*"; exit 1; }

step "setup"
. scripts/device-setup.sh || fail "setup (scripts/device-setup.sh: the wheels in .whl or the package)"
read -r version tag < .device-ray/VERSION || fail "ray: .device-ray/VERSION missing (run scripts/stage-ray.sh here)"
here=$("$python" -c 'import sys; print(f"cp{sys.version_info[0]}{sys.version_info[1]}")')
[ "$here" = "$tag" ] || fail "ray: staged for $tag, this python is $here (scripts/stage-ray.sh ${here:2:1}.${here:3})"

step "ray: unpacking ray $version ($tag)"
cat .device-ray/ray-"$version"-"$tag".tar.xz.part* | xz -d | tar -x -C /tmp/site || fail "ray: unpacking"
step "ray: installing those of its needs this machine lacks"
"$python" scripts/install_missing.py .device-ray/wheels /tmp/site || fail "ray: installing its needs"

step "import"
timeout 180 "$python" - <<'PY' || fail "import (ray with this python and torch, or a task on a local cluster)"
import sys, torch, ray
print("python", sys.version.split()[0], "torch", torch.__version__, "cuda", torch.cuda.is_available(),
      "ray", ray.__version__, ray.__file__)
ray.init(address="local", include_dashboard=False, log_to_driver=False, _node_ip_address="127.0.0.1")
print("cluster", ray.cluster_resources())
assert ray.get(ray.remote(num_cpus=1)(lambda: 41 + 1).remote()) == 42
ray.shutdown()
PY

step "bench: $problems, locally, through Ray, and through Ray with a worker killed and the run resumed"
rm -rf /tmp/ray-bench
timeout 450 "$python" benchmarks/ray_vs_local.py --gpus 0 --problems "$problems" --kill-and-resume \
  --out /tmp/ray-bench
rc=$?
cp /tmp/ray-bench/ray_vs_local/ray_vs_local.json "$OUT/" 2>/dev/null
(cd /tmp/ray-bench/ray_vs_local && tar -czf "$OUT/ray-bench.tar.gz" --exclude problems . ) 2>/dev/null
case $rc in
  0) step "done: the same statuses locally and through Ray, resumed included" ;;
  1) fail "bench: the statuses differ, or the kill and resume did not go through (ray_vs_local.json says which)" ;;
  124) fail "bench: it ran past 450 s" ;;
  *) fail "bench: a dice bench run failed (rc $rc; its stderr is above and in ray-bench.tar.gz)" ;;
esac
