"""A fingerprint of every timed output, and the tolerance that says whether two agree.

The judge checks every timed run of a KernelBench candidate without copying its outputs out
of the candidate's process: the candidate's process reports, for each pair, a fingerprint of
the candidate's output, keyed by the judge (profiler.sandbox.clock), and a process that runs
no candidate code later computes the fingerprint of Model's output on the same inputs with the
same key (profiler.run.kernelbench.run_audit). A fingerprint of output x (n elements) is

    F = sum_i w_i * tanh(x_i / r + c)

with w_i = +-1 drawn from the key, c from the key, and r the root mean square of x itself.
It is built so that no less work than the whole output gives it:

- tanh and the division by x's own size make it nonlinear in x, so no algebraic shortcut
  (r^T A B for a matrix product) computes it from the inputs;
- the random signs make it a sum that no sample of the elements estimates: leaving out or
  guessing a share f of the elements moves F by about sqrt(f * n) while the tolerance grows
  as sqrt(n) times the element tolerance, so a few per mille of wrong elements are seen.

Two outputs whose elements all agree within profiler.measure.verify's tolerance
(|a - b| <= rtol |b| + atol rms(b)) differ in F by a sum of independent +-1 terms, each no
larger than that element's tolerance divided by r (tanh's slope is at most 1) plus the share
by which r itself may move. Hoeffding's bound then keeps |F_a - F_b| under SIGMAS times the
square root of the sum of their squares (`tolerance`) with probability 1 - 2 exp(-SIGMAS^2/2)
(1e-10 at 7). The signs are drawn after the key exists, and they are the same for every
process on one GPU with one torch (a CUDA generator seeded with the key).
"""

from __future__ import annotations

import math

SIGMAS = 7.0
# Elements a chunk: a fingerprint's memory does not grow with the output.
CHUNK = 1 << 24
# Rounding in float32 tanh and a float64 sum: per element at most this much of F.
ROUNDING = 1e-6


def _tolerances(dtype_name: str) -> tuple[float, float]:
    from profiler.measure.verify import TOLERANCES

    return TOLERANCES.get(dtype_name, (0.0, 0.0))  # integers and bool: exact


def _flat(tensor):
    import torch

    flat = tensor.detach().reshape(-1)
    return flat if flat.dtype in (torch.float32, torch.float64) else flat.float()


def _rms(flat) -> float:
    import torch

    if flat.numel() == 0:
        return 0.0
    total = torch.zeros((), dtype=torch.float64, device=flat.device)
    for start in range(0, flat.numel(), CHUNK):
        part = flat[start:start + CHUNK].double()
        total += torch.dot(part, part)
    return math.sqrt(float(total) / flat.numel())


def _scale(rms: float) -> float:
    return rms if rms > 0 and math.isfinite(rms) else 1.0


def fingerprint(tensors: list, key: int) -> list[float]:
    """One F (module docstring) per output tensor, for key `key`; NaN where an output holds
    NaN or infinity (no fingerprint of Model's matches that)."""
    import torch

    out = []
    for index, tensor in enumerate(tensors):
        flat = _flat(tensor)
        rms = _rms(flat)
        if not math.isfinite(rms):
            out.append(float("nan"))
            continue
        scale = _scale(rms)
        generator = torch.Generator(device=flat.device)
        generator.manual_seed((int(key) * 1000003 + index) % (1 << 63))
        shift = float(torch.rand((), generator=generator, device=flat.device)) - 0.5
        total = torch.zeros((), dtype=torch.float64, device=flat.device)
        for start in range(0, flat.numel(), CHUNK):
            part = flat[start:start + CHUNK]
            signs = torch.empty(part.numel(), dtype=torch.float32, device=flat.device)
            signs.bernoulli_(0.5, generator=generator).mul_(2).sub_(1)
            values = torch.tanh(part.float() / scale + shift)
            total += torch.dot(signs.double(), values.double())
        out.append(float(total))
    return out


def tolerance(tensors: list) -> list[float]:
    """SIGMAS times the bound on how far the F of an output that agrees with `tensors`
    element by element (profiler.measure.verify's tolerance) may lie from theirs, per tensor;
    computed where the expected outputs are (Model's, in a process of their own)."""
    import torch

    out = []
    for tensor in tensors:
        flat = _flat(tensor)
        rtol, atol = _tolerances(str(tensor.dtype).removeprefix("torch."))
        rms = _rms(flat)
        scale = _scale(rms)
        # r of an agreeing output lies within (rtol + atol) * r of this one's.
        moves = rtol + atol
        total = 0.0
        for start in range(0, flat.numel(), CHUNK):
            part = flat[start:start + CHUNK].double().abs()
            per_element = (rtol * part + atol * rms) / scale + moves * part / scale
            total += float(torch.dot(per_element, per_element))
        out.append(SIGMAS * math.sqrt(total) + ROUNDING * flat.numel() ** 0.5 + ROUNDING * 10)
    return out


def disagreement(candidate: list, expected: list, allowed: list) -> str | None:
    """Why the candidate's fingerprints (as its process reported them) are not Model's, or None.
    Pure Python: the judge's process compares, with numbers from two processes."""
    if not isinstance(candidate, list) or len(candidate) != len(expected):
        count = len(candidate) if isinstance(candidate, list) else 0
        return f"{count} output fingerprints, expected {len(expected)}"
    for index, (got, want, limit) in enumerate(zip(candidate, expected, allowed)):
        try:
            got = float(got)
        except (TypeError, ValueError):
            return f"output {index}: a fingerprint that is not a number"
        if not math.isfinite(want):
            continue  # Model's own output is not finite here: its fingerprint proves nothing
        if not math.isfinite(got) or abs(got - want) > limit:
            return (f"output {index}: its fingerprint is {got:.6g} where Model's is {want:.6g} "
                    f"(at most {limit:.3g} apart for outputs within the tolerance)")
    return None
