"""`dice bench --judge ray` on a local Ray cluster (this machine, no GPU): the schedule (a
build task on CPUs, then the verdict on a GPU slot), results and --resume as locally, and a
Ray worker killed while it judges: its problem is judged again and the run says so.

The cluster declares one GPU, as Ray lets a machine declare its resources, so that the
verdict tasks take the GPU path; with no real GPU behind it the profiler's verdicts are
no_gpu, as they are locally on this machine."""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import pytest

ray = pytest.importorskip("ray", reason="Ray is the cluster extra: pip install -e '.[cluster]'")

from dice_lsp.bench.results import load  # noqa: E402
from dice_lsp.cli import main  # noqa: E402
from profiler.judging.pool import WORKER_MODULE, JudgeJob  # noqa: E402
from profiler.judging.ray_pool import MAX_ATTEMPTS, RayJudgePool  # noqa: E402

pytestmark = pytest.mark.timeout(420)


@pytest.fixture
def cluster():
    """A local Ray cluster for a test: CPUs for builds and one GPU slot."""
    ray.init(address="local", num_cpus=4, num_gpus=1, include_dashboard=False, log_to_driver=False,
             configure_logging=False, _node_ip_address="127.0.0.1")
    try:
        yield
    finally:
        ray.shutdown()


def test_ray_judging_records_what_local_judging_does_and_resumes(
    cluster, control_problems: Path, controls_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture,
    stop_after_the_first_problem
) -> None:
    out = tmp_path / "out"
    args = [str(control_problems), "--solutions", str(controls_dir), "--out", str(out), "--judge", "ray"]
    assert main(["bench", *args, "--limit", "1"]) == 0
    stop_after_the_first_problem(out)
    capsys.readouterr()

    assert main(["bench", *args, "--limit", "2", "--resume", "--json"]) == 0
    summary = json.loads(capsys.readouterr().out)
    assert summary["problems"] == 2 and summary["errors"] == [] and summary["gpu"] is None
    run = load(out)
    assert [t.state for t in run.tasks.values()] == ["done", "done"]
    relu = run.tasks["level1/19_ReLU"].candidates
    assert relu[0].verdict["message"] == "judged by the first run"
    assert len(relu) == 2  # the correct and the wrong control, both judged by the first run
    for candidate in [*relu, *run.tasks["level1/21_Sigmoid"].candidates]:
        verdict = candidate.verdict
        assert verdict["status"] == "no_gpu" and verdict["correct"] is None and verdict["speedup"] is None
        placed = verdict["extra"]["judged_on"]
        # a verdict task holds the cluster's GPU slot: Ray pinned the worker to it
        assert placed["judge"] == "ray" and placed["gpu"] == "0" and placed["attempts"] == 1 and placed["lost"] == []
    (resumed,) = run.tasks["level1/21_Sigmoid"].candidates
    assert resumed.text.startswith("# from the stopped run")


def ray_worker_judging() -> int | None:
    """The Ray worker process running judge_on_gpu now: the parent of a judge worker
    (`python -m profiler.judging.worker`) whose own title is Ray's `ray::judge_on_gpu`."""
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            cmdline = Path(f"/proc/{entry}/cmdline").read_bytes()
            if WORKER_MODULE.encode() not in cmdline:
                continue
            parent = int(Path(f"/proc/{entry}/stat").read_text().rsplit(")", 1)[1].split()[1])
            if Path(f"/proc/{parent}/cmdline").read_bytes().startswith(b"ray::judge_on_gpu"):
                return parent
        except (OSError, ValueError, IndexError):
            continue
    return None


def test_a_ray_worker_killed_mid_judging_loses_no_problem(cluster, control_problems: Path, controls_dir: Path) -> None:
    problem = control_problems / "level1" / "19_ReLU.py"
    candidate = (controls_dir / "level1" / "19_ReLU.correct.py").read_text()
    job = JudgeJob(problem.read_text(), [candidate], str(problem), 60.0)
    said: list[str] = []
    killed: list[int] = []

    def kill_the_first_worker() -> None:
        deadline = time.monotonic() + 240
        while time.monotonic() < deadline and not killed:
            pid = ray_worker_judging()
            if pid is not None:
                os.kill(pid, signal.SIGKILL)
                killed.append(pid)
                return
            time.sleep(0.2)

    killer = threading.Thread(target=kill_the_first_worker, daemon=True)
    killer.start()
    with RayJudgePool("ray", say=said.append) as pool:
        ((index, answer),) = list(pool.judge_all([job]))
    killer.join()
    assert killed, "no Ray worker was seen judging"
    assert index == 0 and not isinstance(answer, Exception), answer
    (verdict,) = answer["verdicts"]
    assert verdict["status"] == "no_gpu"
    placed = verdict["extra"]["judged_on"]
    assert placed["attempts"] == 2 and len(placed["lost"]) == 1
    assert placed["lost"][0].startswith(("WorkerCrashedError", "NodeDiedError", "ObjectLostError"))
    assert said == [f"19_ReLU.py: the Ray worker judging it died ({placed['lost'][0]}); judging it again "
                    f"(attempt 2 of {MAX_ATTEMPTS})"]


def state_of(pid: int) -> str:
    return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]


def settles(pid: int, stopped: bool, seconds: float = 5) -> bool:
    """Whether process `pid` is (not) stopped within `seconds`: a signal takes effect when
    the process is next scheduled."""
    deadline = time.monotonic() + seconds
    while (state_of(pid) == "T") != stopped and time.monotonic() < deadline:
        time.sleep(0.02)
    return (state_of(pid) == "T") == stopped


def test_a_judge_worker_measuring_stops_the_builds_of_ray_build_tasks_beside_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from profiler.judging.schedule import BUILDERS_ENV, BuildPause
    from profiler.sandbox.keeper import descendants

    # A build task's shape: the task's process, a sandbox keeper below it, and the build
    # (here a sleep) at the build niceness below that.
    builder = subprocess.Popen(["sh", "-c", "sh -c 'nice -n 19 sleep 60 & wait' & wait"], start_new_session=True)
    try:
        deadline = time.monotonic() + 10
        builds: list[int] = []
        while not builds and time.monotonic() < deadline:
            builds = [p for p in descendants(builder.pid)
                      if Path(f"/proc/{p}/cmdline").read_bytes().startswith(b"sleep")]
            time.sleep(0.05)
        (build,) = builds
        folder = tmp_path / "builders"
        folder.mkdir(mode=0o700)
        (folder / str(builder.pid)).touch()
        monkeypatch.setenv(BUILDERS_ENV, str(folder))
        pause = BuildPause()
        try:
            pause.hold()
            assert settles(build, stopped=True)  # stopped while the run measures
            assert state_of(builder.pid) != "T"  # the task and its keeper go on
            pause.release()
            assert settles(build, stopped=False)
        finally:
            pause.close()
    finally:
        os.killpg(builder.pid, signal.SIGKILL)
        builder.wait()


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def session_processes(session: int) -> list[int]:
    """The live processes of a session (those `ray start` started, in the session it leads)."""
    found = []
    for entry in os.listdir("/proc"):
        try:
            if entry.isdigit() and os.getsid(int(entry)) == session:
                found.append(int(entry))
        except OSError:
            continue
    return found


@pytest.fixture
def head_cluster(tmp_path: Path):
    """A Ray cluster started apart from the test, as on a head machine (`ray start --head`,
    one GPU slot), reached through Ray Client: `ray://127.0.0.1:PORT`."""
    client_port = free_port()
    # Ray's own files, where their socket paths fit in AF_UNIX's 107 bytes.
    temp_dir = tempfile.mkdtemp(prefix="ray-")
    ray_cli = str(Path(sys.executable).with_name("ray"))
    head = subprocess.Popen(
        [ray_cli, "start", "--head", "--block", "--node-ip-address", "127.0.0.1", "--port", str(free_port()),
         "--ray-client-server-port", str(client_port), "--num-cpus", "3", "--num-gpus", "1",
         "--include-dashboard", "false", "--disable-usage-stats", "--temp-dir", temp_dir],
        stdout=subprocess.DEVNULL, stderr=open(tmp_path / "head.log", "w"), start_new_session=True)
    try:
        deadline = time.monotonic() + 90
        while time.monotonic() < deadline:
            try:
                socket.create_connection(("127.0.0.1", client_port), timeout=1).close()
                break
            except OSError:
                assert head.poll() is None, (tmp_path / "head.log").read_text()[-2000:]
                time.sleep(0.5)
        else:
            pytest.fail("the Ray head did not open its client port within 90 s")
        address = f"ray://127.0.0.1:{client_port}"
        # The port opens before the cluster behind it serves clients: wait until a task runs.
        probe = ("import ray, sys; ray.init(sys.argv[1]); "
                 "assert ray.get(ray.remote(num_cpus=0)(lambda: 1).remote()) == 1")
        for _ in range(3):
            if subprocess.run([sys.executable, "-c", probe, address], capture_output=True, timeout=120).returncode == 0:
                break
        else:
            pytest.fail("no task ran on the Ray head through its client port")
        yield address
    finally:
        head.terminate()
        try:
            head.wait(30)
        except subprocess.TimeoutExpired:
            pass
        for pid in session_processes(head.pid):
            os.kill(pid, signal.SIGKILL)
        head.wait()
        shutil.rmtree(temp_dir, ignore_errors=True)


def test_judging_through_ray_client_on_a_cluster_started_apart(
    head_cluster: str, control_problems: Path, controls_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    out = tmp_path / "out"
    assert main(["bench", str(control_problems), "--solutions", str(controls_dir), "--out", str(out), "--limit", "1",
                 "--judge", head_cluster, "--json"]) == 0
    summary = json.loads(capsys.readouterr().out)
    assert summary["problems"] == 1 and summary["errors"] == []
    (record,) = load(out).tasks.values()
    assert record.state == "done" and len(record.candidates) == 2
    for candidate in record.candidates:
        assert candidate.verdict["status"] == "no_gpu"
        assert candidate.verdict["extra"]["judged_on"]["gpu"] == "0"
    assert not ray.is_initialized()  # the run let go of the cluster it connected to



@pytest.mark.gpu
@pytest.mark.slow
def test_on_a_gpu_ray_judges_as_local_judging_does(
    control_problems: Path, controls_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The same problems and controls judged by a local run and through `--judge ray` on one
    GPU: the same status for every candidate, speedups within 5% (two runs of `dice bench`
    agree within 0.2% on these controls: README's benchmarks)."""
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", os.environ.get("CUDA_VISIBLE_DEVICES", "0").split(",")[0])
    verdicts = {}
    for judge in (None, "ray"):
        out = tmp_path / (judge or "local")
        assert main(["bench", str(control_problems), "--solutions", str(controls_dir), "--out", str(out), "--limit",
                     "2", *(["--judge", judge] if judge else [])]) == 0
        verdicts[judge] = {(name, Path(c.generation["file"]).name): c.verdict
                           for name, record in load(out).tasks.items() for c in record.candidates}
    assert verdicts[None].keys() == verdicts["ray"].keys()
    for key, local in verdicts[None].items():
        through_ray = verdicts["ray"][key]
        assert through_ray["status"] == local["status"], key
        assert through_ray["gpu"] == local["gpu"] is not None
        if local["speedup"] is not None:
            assert through_ray["speedup"] == pytest.approx(local["speedup"], rel=0.05), key


def test_problems_take_the_one_gpu_in_turn(
    cluster, control_problems: Path, controls_dir: Path, tmp_path: Path
) -> None:
    out = tmp_path / "out"
    assert main(["bench", str(control_problems), "--solutions", str(controls_dir), "--out", str(out),
                 "--judge", "ray"]) == 0
    run = load(out)
    assert len(run.tasks) == 3 and all(t.state == "done" for t in run.tasks.values())
    turns = sorted((record.candidates[0].verdict["extra"]["judged_on"] for record in run.tasks.values()),
                   key=lambda turn: turn["started"])
    # One GPU slot: one problem judged at a time (whichever was built first goes first).
    # Both times are rounded to the millisecond: one may seem to end up to 1 ms after the next began.
    for before, after in zip(turns, turns[1:]):
        assert before["started"] + before["seconds"] <= after["started"] + 0.0011
    assert {t["gpu"] for t in turns} == {"0"}
