"""Time from a fresh process's start to its first decoded block, for a checkpoint folder of a
DICE size's shape, in a first process (compiler caches empty) and the processes after it.

    python benchmarks/warm_start.py --shape 1.7b [--paths default,cached] [--processes 2] [--tokens 16]
    python benchmarks/warm_start.py --shape tiny --processes 1     # any machine: checks the script runs

The folder (benchmarks/dice_shape.py's random bf16 weights, the SDAR tokenizer of tests/data,
written by engine.model.loading.save_checkpoint; kept in --folder and reused) is what
`engine.load` reads, so loading counts as a user's does; writing it leaves its files in the
OS's page cache, so every process reads warm files. Per decoding path (`default`: the
engine's choice, engine.model.routes.default_path; or a path of routes.PATHS), --processes
processes run one after the other, all with one fresh compile cache (DICE_COMPILE_CACHE:
engine.model.compile_cache, inductor's, Triton's and CuPy's caches and the warm-up record):
the first compiles, the later ones find its work. Each process: `import engine`, engine.load
of the folder, the engine's warm_up (compilation and CUDA graphs, as the worker pays before it
says ready), then one decode of --tokens tokens (a 64-token prompt, one candidate, the
default sampling). Reported per process, in seconds from its start (the parent's clock when it
spawned it): import, loaded, warm (warm-up done), first block (the first whole block, i.e. its
denoising steps, decoded), decode done; and the path that served. Writes
$OUT/warm_start-SHAPE.json (OUT defaults to ./.device-out).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import replace
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

PROMPT_TOKENS = 64


def child(folder: str, path: str, tokens: int, started: float) -> dict:
    """One process's timings (seconds since `started`, the parent's time.time() at spawn)."""
    times = {"spawned_to_main": time.time() - started}
    import torch

    import engine
    from engine.decoding.decode import decode
    from engine.model.routes import Routing
    from engine.types import Sampling

    times["import"] = time.time() - started
    loaded = engine.load(folder, routing=Routing(path=None if path == "default" else path))
    times["loaded"] = time.time() - started
    said: list[str] = []
    loaded.warm_up(said.append)
    times["warm"] = time.time() - started
    first: list[float] = []

    def progress(p) -> None:
        if p.phase != "prefill" and not first:
            first.append(time.time() - started)

    ids = torch.randint(0, 150000, (PROMPT_TOKENS,), generator=torch.Generator().manual_seed(1)).tolist()
    result = decode(loaded.model, ids, n=1, max_tokens=tokens, sampling=Sampling(), stop_ids=[],
                    path=loaded.decode_path, on_progress=progress, fusion=loaded.fusion)
    times["first_block"] = first[0] if first else None
    times["decode_done"] = time.time() - started
    return {"path": loaded.decode_path, "seconds": times, "tokens": len(result.tokens[0]),
            "steps": result.steps, "warm_up_said": said}


def write_folder(shape: str, folder: Path) -> float:
    """The random checkpoint of `shape` in `folder` (made unless its weights are there); seconds taken."""
    import torch

    from benchmarks.dice_shape import SHAPES, random_model
    from engine.model.loading import save_checkpoint
    from tests.data.unpack import unpack_tokenizer

    if (folder / "config.json").is_file() and list(folder.glob("*.safetensors")):
        return 0.0
    started = time.perf_counter()
    config = SHAPES.get(shape) or replace(SHAPES["1.7b"], hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                                          num_attention_heads=4, num_key_value_heads=2, head_dim=16)
    device = "cuda" if torch.cuda.is_available() else "cpu"
    model = random_model(config, device, torch.bfloat16)
    save_checkpoint(model, None, folder)
    del model
    with tempfile.TemporaryDirectory() as scratch:
        tokenizer = unpack_tokenizer(Path(scratch) / "tok")
        for item in tokenizer.iterdir():
            if item.name != "config.json":
                shutil.copy(item, folder / item.name)
    return time.perf_counter() - started


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--shape", choices=["1.7b", "4b", "8b", "tiny"], default="1.7b")
    parser.add_argument("--folder", type=Path, help="the checkpoint folder (default: /tmp/dice-warm-SHAPE)")
    parser.add_argument("--paths", default="default,cached", help="decoding paths, comma-separated (default: %(default)s)")
    parser.add_argument("--processes", type=int, default=2, help="processes per path, one after another")
    parser.add_argument("--tokens", type=int, default=16, help="tokens the first decode generates")
    parser.add_argument("--child", help=argparse.SUPPRESS)
    parser.add_argument("--started", type=float, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        print(json.dumps(child(args.child, args.paths, args.tokens, args.started)))
        return 0
    folder = args.folder or Path(f"/tmp/dice-warm-{args.shape}")
    report = {"shape": args.shape, "folder": str(folder), "tokens": args.tokens, "prompt_tokens": PROMPT_TOKENS,
              "folder_written_s": write_folder(args.shape, folder),
              "folder_gb": sum(f.stat().st_size for f in folder.iterdir()) / 1e9, "runs": []}
    out_file = Path(os.environ.get("OUT", ".device-out")) / f"warm_start-{args.shape}.json"
    out_file.parent.mkdir(parents=True, exist_ok=True)
    print(f"{args.shape}: {folder} ({report['folder_gb']:.2f} GB)")
    print(f"{'path':<9}{'process':>8}{'import':>8}{'loaded':>8}{'warm':>8}{'1st block':>10}{'done':>8}  serves")
    for path in args.paths.split(","):
        cache = Path(tempfile.mkdtemp(prefix="dice-compile-"))
        env = {k: v for k, v in os.environ.items() if k not in ("TORCHINDUCTOR_CACHE_DIR", "TRITON_CACHE_DIR",
                                                                  "CUPY_CACHE_DIR")}
        env.update(DICE_COMPILE_CACHE=str(cache), PYTHONPATH=os.pathsep.join(
            [str(REPO), *filter(None, [os.environ.get("PYTHONPATH")])]))
        for process in range(1, args.processes + 1):
            started = time.time()
            done = subprocess.run([sys.executable, __file__, "--child", str(folder), "--paths", path, "--tokens",
                                   str(args.tokens), "--started", repr(started)], env=env, capture_output=True,
                                  text=True)
            wall = time.time() - started
            if done.returncode != 0:
                run = {"path": path, "process": process, "error": done.stderr[-3000:], "wall_s": wall}
                print(f"{path:<9}{process:>8}  failed: {done.stderr.strip().splitlines()[-1:]}")
            else:
                run = {"asked": path, "process": process, "wall_s": wall, **json.loads(done.stdout.splitlines()[-1])}
                s = run["seconds"]
                first = "-" if s["first_block"] is None else f"{s['first_block']:.1f}"
                print(f"{path:<9}{process:>8}{s['import']:8.1f}{s['loaded']:8.1f}{s['warm']:8.1f}{first:>10}"
                      f"{s['decode_done']:8.1f}  {run['path']}", flush=True)
            report["runs"].append(run)
            out_file.write_text(json.dumps(report, indent=2) + "\n")
        shutil.rmtree(cache, ignore_errors=True)
    print(f"wrote {out_file}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
