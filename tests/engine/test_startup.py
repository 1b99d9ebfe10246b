"""What loading the built-in model costs a CLI fill: no module it does not need.

transformers (its tokenizer classes) and torch._dynamo (which torch imports the first time a
tensor on the meta device draws random values) each add most of a second to `dice fill` on a
CPU, and the built-in model needs neither (benchmarks/cli_fill_time.py measures the whole).
"""

from __future__ import annotations

import json
import subprocess
import sys

LOAD = """
import json, sys
import engine
engine.load("builtin", device="cpu")
print(json.dumps({name: name in sys.modules for name in ("transformers", "torch._dynamo")}))
"""


def test_loading_the_builtin_model_imports_neither_transformers_nor_dynamo(repo_root):
    done = subprocess.run([sys.executable, "-c", LOAD], cwd=repo_root, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout.splitlines()[-1]) == {"transformers": False, "torch._dynamo": False}
