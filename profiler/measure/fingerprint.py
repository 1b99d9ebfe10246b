"""A fingerprint of every timed output, and the tolerance that says whether two agree.

The judge checks every timed run of a KernelBench candidate without copying its outputs out
of the candidate's process: the candidate's process reports, for each pair, a fingerprint of
the candidate's output, keyed by the judge (profiler.sandbox.clock), and a process that runs
no candidate code later computes the fingerprint of Model's output on the same inputs with the
same key (profiler.run.kernelbench.run_audit). A fingerprint of output x (n elements) is

    F = sum_i w_i * tanh(x_i / r + c)

with w_i = +-1 drawn from the key, c from the key, and r the root mean square of x itself;
r goes beside F (F alone is the same for x and any positive multiple of x: an output that
skips a final scaling, or x for x / norm(x), would agree). It is built so that no less work
than the whole output gives it:

- tanh and the division by x's own size make it nonlinear in x, so no algebraic shortcut
  (r^T A B for a matrix product) computes it from the inputs;
- the random signs make it a sum that no sample of the elements estimates: leaving out or
  guessing a share f of the elements moves F by about sqrt(f * n) while the tolerance grows
  as sqrt(n) times the element tolerance, so a few per mille of wrong elements are seen.

Two outputs whose elements all agree within profiler.measure.verify's tolerance
(|a - b| <= rtol |b| + atol rms(b), or a protocol's rtol |b| + atol) differ in F by a sum of
independent +-1 terms, each no larger than that element's tolerance divided by r (tanh's slope
is at most 1) plus the share by which r itself may move. Hoeffding's bound then keeps
|F_a - F_b| under SIGMAS times the square root of the sum of their squares (`tolerance`) with
probability 1 - 2 exp(-SIGMAS^2/2) (1e-10 at 7), and their r within rms(a - b) <=
rtol r + the absolute part of the tolerance. The signs are drawn after the key exists, and
they are the same for every process on one GPU with one torch (a CUDA generator seeded with
the key).

The bound is on a sum: errors spread over every element stay inside it up to several times
the element tolerance each (TF32 products for an FP32 problem, half their elements past the
tolerance, agree), where the element comparison of profiler.measure.verify sees them.

Elements that are not finite count as themselves: r counts them as 0, an infinity adds its
sign (tanh's limit, which a finite element reaches only past about 9 r), a NaN adds NAN_TERM,
which no other element can. An output of Model that holds NaN or infinity somewhere is then
still checked everywhere else, and matched only by one that holds the same there.
"""

from __future__ import annotations

import math

SIGMAS = 7.0
# Elements a chunk: a fingerprint's memory does not grow with the output.
CHUNK = 1 << 24
# Rounding in float32 tanh and a float64 sum: per element at most this much of F.
ROUNDING = 1e-6
# What a NaN element adds to F (times its sign): outside tanh's range.
NAN_TERM = 3.0


def _tolerances(dtype_name: str, protocol: tuple[float, float] | None) -> tuple[float, float, bool]:
    """(rtol, atol, whether atol is absolute): verify's, the dtype's own or the protocol's;
    integers and bool exact."""
    from profiler.measure.verify import tolerance

    return tolerance(dtype_name, protocol)


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
        part = _finite_part(flat[start:start + CHUNK].double())
        total += torch.dot(part, part)
    return math.sqrt(float(total) / flat.numel())


def _finite_part(part):
    """`part` with its infinities and NaNs as 0 (what they add to r)."""
    import torch

    return torch.nan_to_num(part, nan=0.0, posinf=0.0, neginf=0.0)


def _scale(rms: float) -> float:
    return rms if rms > 0 and math.isfinite(rms) else 1.0


def fingerprint(tensors: list, key: int) -> list[float]:
    """F and r (module docstring) of each output tensor in turn ([F_0, r_0, F_1, r_1, ...]),
    for key `key`; NaN only where r itself is not finite (float64 squares past its range)."""
    import torch

    out = []
    for index, tensor in enumerate(tensors):
        flat = _flat(tensor)
        rms = _rms(flat)
        if not math.isfinite(rms):
            out += [float("nan"), rms]
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
            values = torch.tanh(part.float() / scale + shift).nan_to_num_(nan=NAN_TERM)
            total += torch.dot(signs.double(), values.double())
        out += [float(total), rms]
    return out


def tolerance(tensors: list, protocol: tuple[float, float] | None = None) -> list[float]:
    """How far the F and the r of an output that agrees with `tensors` element by element
    (profiler.measure.verify's tolerance: the dtype's, or the protocol's (rtol, atol) where one
    is given, as the candidate's own comparisons use) may lie from theirs, in fingerprint()'s
    order: SIGMAS times the bound for F, rtol r + the absolute part for r. Computed where the
    expected outputs are (Model's, in a process of their own). An element that is not finite
    must be matched exactly."""
    import torch

    out = []
    for tensor in tensors:
        flat = _flat(tensor)
        rtol, atol, absolute = _tolerances(str(tensor.dtype).removeprefix("torch."), protocol)
        rms = _rms(flat)
        scale = _scale(rms)
        floor = atol if absolute else atol * rms  # the absolute part of an element's tolerance
        # r of an agreeing output lies within rtol * r + floor of this one's.
        moves = rtol + floor / scale
        total = 0.0
        for start in range(0, flat.numel(), CHUNK):
            raw = flat[start:start + CHUNK].double()
            part = _finite_part(raw).abs()
            per_element = ((rtol * part + floor) / scale + moves * part / scale) * torch.isfinite(raw)
            total += float(torch.dot(per_element, per_element))
        out += [SIGMAS * math.sqrt(total) + ROUNDING * flat.numel() ** 0.5 + ROUNDING * 10,
                (rtol * rms + floor) * 1.001 + ROUNDING * 1e-6 * rms + 1e-30]
    return out


def disagreement(candidate: list, expected: list, allowed: list) -> str | None:
    """Why the candidate's fingerprints (as its process reported them) are not Model's, or None.
    Pure Python: the judge's process compares, with numbers from two processes."""
    if not isinstance(candidate, list) or len(candidate) != len(expected):
        count = len(candidate) if isinstance(candidate, list) else 0
        return f"{count} fingerprint numbers, expected {len(expected)} (F and r of each output)"
    for index, (got, want, limit) in enumerate(zip(candidate, expected, allowed)):
        what = "fingerprint" if index % 2 == 0 else "root mean square"
        try:
            got = float(got)
        except (TypeError, ValueError):
            return f"output {index // 2}: a {what} that is not a number"
        if not math.isfinite(want):
            continue  # Model's own r is past float64: nothing of this output proves anything
        if not math.isfinite(got) or abs(got - want) > limit:
            return (f"output {index // 2}: its {what} is {got:.6g} where Model's is {want:.6g} "
                    f"(at most {limit:.3g} apart for outputs within the tolerance)")
    return None
