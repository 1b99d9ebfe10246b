"""How strictly a candidate is judged.

`dice-lsp` (the default) is this project's judge: per-dtype tolerances scaled to the output
(profiler.measure.verify), three fresh input sets before timing and one after, timing runs
added until the speedup's interval is narrow. `dice` scores as DICE's evaluation does
(KernelBench's eval_kernel_against_ref with DICE's settings), so that DICE's paper table can be
reproduced beside ours: torch.allclose with atol = rtol = 1e-2, five correctness trials, 100
timed runs, and an answer that DICE's code extraction rejects is a failure (dice_lsp.bench).
Every trust rule of the sandbox and the verdict holds under both.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Protocol:
    name: str
    input_sets: int  # fresh input sets compared in all, the last one after timing
    # (rtol, atol) for every float dtype, atol absolute as torch.allclose takes it; None: the
    # dtype's own tolerance, atol scaled by the output's root mean square.
    tolerance: tuple[float, float] | None
    timed_runs: int | None  # pairs of timed runs; None: adaptive (profiler.measure.timing)
    strict_extraction: bool  # an answer DICE's extraction finds no code in fails

    def to_request(self) -> dict:
        return {"name": self.name, "input_sets": self.input_sets,
                "tolerance": list(self.tolerance) if self.tolerance else None, "timed_runs": self.timed_runs}


DICE_LSP = Protocol("dice-lsp", 4, None, None, False)
DICE = Protocol("dice", 5, (1e-2, 1e-2), 100, True)
PROTOCOLS = {p.name: p for p in (DICE_LSP, DICE)}
DEFAULT = DICE_LSP.name


def protocol(name: str | None) -> Protocol:
    """The protocol called `name` (None: the default); ValueError for an unknown name."""
    try:
        return PROTOCOLS[name or DEFAULT]
    except KeyError:
        raise ValueError(f"unknown protocol {name!r}: expected one of {', '.join(PROTOCOLS)}") from None
