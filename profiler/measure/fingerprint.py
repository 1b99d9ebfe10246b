"""A fingerprint of every timed output, and the tolerance that says whether two agree.

The judge checks timed runs of a KernelBench candidate without copying their outputs out of
the candidate's process: the candidate's process reports, for each run, a fingerprint of
the candidate's output, keyed by the judge (profiler.sandbox.clock), and a process that runs
no candidate code later computes the fingerprint of Model's output on the same inputs with the
same key (profiler.run.kernelbench.run_audit). The fingerprint of output x (n elements) is
SUMS (m = 64) keyed sums and x's root mean square r (non-finite elements count as 0 in r):

    F_j = sum_i w_ji tanh(x_i / (s r) + c),   j = 1 .. m,

with every w_ji = +-1 drawn from the key independently of every other, c in [-1/2, 1/2) from
the key, and s = SLOPE_SCALE (1/2). r goes beside the sums (they are the same for x and any
positive multiple of x: an output that skips a final scaling, or x for x / norm(x), would
agree). No less work than the whole output gives it:

- tanh and the division by x's own size make it nonlinear in x, so no algebraic shortcut
  (k^T A B for a matrix product) computes it from the inputs: over the +-2 that a typical
  element's x / (s r) spans, tanh is nowhere near a linear function;
- the random signs make each sum one that no sample of the elements estimates: leaving out or
  guessing a share f of the elements moves it by about sqrt(f * n) while the tolerance grows
  as sqrt(n) times the element tolerance, so a few per mille of wrong elements are seen.

How far an agreeing output's sums lie (`tolerance`, computed beside Model's outputs). Let a
agree with Model's b element by element within profiler.measure.verify's tolerance t_i =
rtol |b_i| + floor (floor: atol times b's r, or a protocol's absolute atol). Then |r_a - r_b|
<= rms(a - b) <= rtol r_b + floor. Write y_i = b_i / (s r_b), z_i = y_i + c, and rho = r_b /
r_a (known to the judge, which has both r): a's element enters tanh at z_i + (rho - 1) y_i +
rho (a_i - b_i) / (s r_b). So

    F_j(a) - F_j(b) - (rho - 1) G_j = sum_i w_ji D_i,   G_j = sum_i w_ji sech^2(z_i) y_i,

where G_j, computed with Model's output, takes out the share that r's own move gives to
every element (left in, it could be as large as every element's tolerance itself), and
each D_i is bounded by what `tolerance` computes from b alone:

    |D_i| <= u_i = sech^2(max(0, |z_i| - dmax |y_i| - e_i)) e_i + 0.385 (dmax y_i)^2 + ROUNDING,

with e_i = rho_max t_i / (s r_b) the largest move of the element's argument, rho_max and
dmax the largest rho and |rho - 1| the r check lets through, and 0.385 half the largest
|tanh''| (the first term is tanh's steepest slope over the argument's reach, the second the
rest of r's move past the linear share). Elements of b that are not finite count as
themselves (below) and must be matched exactly: u_i = 0. Let U = sum_i u_i^2. The signs are
independent of everything D_i depends on, so each sum's error R_j = sum_i w_ji D_i is a sum of
independent terms of either sign, at most u_i each, and for outputs within the tolerance

- each sum: P(|R_j| > SIGMAS sqrt(U)) <= 2 exp(-SIGMAS^2 / 2) (Hoeffding), so for all m
  sums together at most FALSE_ALARM / 2 = 5e-11 (SIGMAS = sqrt(2 ln(4 m / FALSE_ALARM)),
  7.56);
- their energy: R_j / sqrt(U) is sub-Gaussian with variance proxy at most 1 and the m of them
  are independent, so E exp(l R_j^2 / U) <= (1 - 2 l)^(-1/2) and, by Chernoff's bound,
  P(mean_j R_j^2 > KAPPA U) <= exp(-m (KAPPA - 1 - ln KAPPA) / 2) = FALSE_ALARM / 2, with
  KAPPA = 2.75 for m = 64.

An output within the tolerance is then taken for a wrong one with probability at most
FALSE_ALARM (1e-10) per output; the bound is tight (every element at its tolerance gives
mean_j R_j^2 near U). The r check itself: |r_a - r_b| <= (rtol r_b + floor) * 1.001 plus
rounding. The energy test is what sees errors spread over every element: errors of g times
the element tolerance everywhere (g t_i, random signs) give mean_j R_j^2 of about g^2 U, past
KAPPA U from g of about 1.7 on (measured, 2^16 elements: on 3 keys of 50 at g = 1.5, two in
three at 1.75, nine in ten at 2, every key from 2.5); a sparse error (a few elements far off)
moves a single sum past SIGMAS sqrt(U). Errors of a few times the element tolerance pass
where they are fewer or smaller than that, or sit where tanh is flat (below).

The slope: the bound follows tanh's slope at each element, so a flat tanh hides nothing by
itself, but the energy test weighs each element's error by its slope squared. With s = 1/2 the
weight sits on elements within about r / 2 of -c s r, where an element's tolerance is mostly
its absolute part; errors that do not grow with the element (the rounding of a long dot
product) are seen at their largest against it. TF32 products for an FP32 problem (signed
inputs, inputs rounded to nearest) give mean_j R_j^2 of 4.2 U at s = 1/2, 3.1 U at s = 1 and
2.3 U at s = 2; with m = 64 (KAPPA 2.75) that is every key at s = 1/2, two in three at s = 1;
with m = 32 (KAPPA 3.82) three in five at s = 1/2. Elements past about 1.5 r (|z| > 2.5, slope
below 0.03) are seen only where they move far, and past about 4.5 r float32's tanh is 1.

Where the absolute part of the tolerance reaches half of Model's r (an output that small under
a protocol's absolute atol), agreeing outputs may have any scale of their own and the sums say
nothing: only r is compared (`tolerance` gives U = infinity).

Elements that are not finite count as themselves: r counts them as 0, an infinity adds its
sign (tanh's limit, which a finite element reaches in float32 only past about 9 s r), a NaN
adds NAN_TERM, which no other element can. An output of Model that holds NaN or infinity
somewhere is then still checked everywhere else, and matched only by one that holds the same
there.

Cost, in the candidate's process (inside the judge's timing windows, for every timed pair): one
pass for r, one for the arguments, one tanh per element in place and one copy to float64, then
for each 16 sums one random int32 per element (a GROUP_BITS-bit index whose bits are the
element's 16 signs) and one index_add of the element's term into 2^16 float64 bins; the 16 sums
are the bins times the table of every index's signs. All m sums come from one pass over each
chunk, about 96 bytes of memory traffic per element of a float32 output (4 + 8 + 8 + 12 for
the terms, 16 for each 16 sums), no allocation per chunk. The signs are drawn after the key
exists, and they are the same for every process on one device with one torch (a generator of
that device seeded with the key, drawn in the same order).
"""

from __future__ import annotations

import math

# Keyed sums per output (m): what the energy test averages over (module docstring).
SUMS = 64
# Bits of one random index: the signs of that many sums for one element.
GROUP_BITS = 16
GROUPS = SUMS // GROUP_BITS
# x / (SLOPE_SCALE r) enters tanh.
SLOPE_SCALE = 0.5
# At most this probability per output that one within the tolerance is taken for a wrong one.
FALSE_ALARM = 1e-10
# Elements a chunk: a fingerprint's memory does not grow with the output.
CHUNK = 1 << 24
# Rounding of one element's term (the argument, tanh) in float32, in float64: at most this much.
ROUNDING = 1e-6
ROUNDING_64 = 1e-14
# Rounding of a float64 sum, per element summed (far above float64's own).
SUM_ROUNDING = 1e-12
# Rounding of r itself (float32 accumulation on a GPU), relative.
RMS_ROUNDING = 1e-5
# An r at most this small scales nothing (its inverse would be past float32's range).
TINY_RMS = 1e-30
# What a NaN element adds to a sum (times its sign): outside tanh's range.
NAN_TERM = 3.0
# Half the largest |tanh''| (4 / (3 sqrt 3)), rounded up.
TANH_CURVATURE = 0.385
# Numbers of one output in fingerprint()'s list (F_1 .. F_m, r) and in tolerance()'s (U, the
# r limit, G_1 .. G_m).
PRINT_WIDTH = SUMS + 1
TOLERANCE_WIDTH = SUMS + 2


def _kappa(sums: int, probability: float) -> float:
    """The kappa > 1 with exp(-sums (kappa - 1 - ln kappa) / 2) = probability."""
    target = 2 * math.log(1 / probability) / sums
    low, high = 1.0, 2.0 + 2 * target
    for _ in range(200):
        middle = (low + high) / 2
        if middle - 1 - math.log(middle) < target:
            low = middle
        else:
            high = middle
    return high


SIGMAS = math.sqrt(2 * math.log(4 * SUMS / FALSE_ALARM))
KAPPA = _kappa(SUMS, FALSE_ALARM / 2)
_TABLES: dict = {}


def _tolerances(dtype_name: str, protocol: tuple[float, float] | None) -> tuple[float, float, bool]:
    """(rtol, atol, whether atol is absolute): verify's, the dtype's own or the protocol's;
    integers and bool exact."""
    from profiler.measure.verify import tolerance

    return tolerance(dtype_name, protocol)


def _parts(tensor):
    """(start, the chunk in the dtype of the arithmetic) of a tensor's elements: float64 as it
    is, anything else in float32."""
    import torch

    flat = tensor.detach().reshape(-1)
    for start in range(0, flat.numel(), CHUNK):
        part = flat[start:start + CHUNK]
        yield start, part if part.dtype in (torch.float32, torch.float64) else part.float()


def _rms(tensor) -> tuple[float, list[bool]]:
    """(r, whether each chunk holds a NaN): one pass, a norm a chunk (float32 accumulation on
    a GPU); chunks with an infinity, a NaN, or squares past float32's range either way, again
    in float64."""
    import torch

    norms = [torch.linalg.vector_norm(part) for _, part in _parts(tensor)]
    if not norms:
        return 0.0, []
    values = torch.stack(norms).double().tolist()
    total = 0.0
    nans = []
    for (_, part), value in zip(_parts(tensor), values):
        nans.append(math.isnan(value))
        if not math.isfinite(value) or value == 0.0:
            exact = torch.nan_to_num(part.double(), nan=0.0, posinf=0.0, neginf=0.0)
            value = math.sqrt(float(torch.dot(exact, exact)))
        total += value * value
    return math.sqrt(total / tensor.numel()), nans


def _scale(rms: float) -> float:
    """What x is divided by besides s: r, or 1 where r is 0, past float64 or so small that its
    inverse is past float32."""
    return rms if TINY_RMS < rms < math.inf else 1.0


def _table(device):
    """Every GROUP_BITS-bit index's signs (+1 where its bit is set), float64, (GROUP_BITS, 2^GROUP_BITS)."""
    import torch

    table = _TABLES.get(str(device))
    if table is None:
        index = torch.arange(1 << GROUP_BITS, device=device)
        bits = torch.arange(GROUP_BITS, device=device)
        table = ((index[None, :] >> bits[:, None]) & 1).double() * 2 - 1
        _TABLES[str(device)] = table
    return table


def _keyed(tensor, key: int, index: int, rms: float, nans: list[bool], on_chunk=None):
    """(F, G): the SUMS keyed sums of output `index` (module docstring) as a float64 tensor,
    and where `on_chunk` is given also the G_j, with on_chunk(part, z, y, finite) called on
    each chunk (its elements, their arguments of tanh, y, whether each is finite). One buffer
    of each kind for every chunk: no chunk allocates (a CPU's first touch of fresh pages costs
    more than the arithmetic)."""
    import torch

    device = tensor.device
    generator = torch.Generator(device=device)
    generator.manual_seed((int(key) * 1000003 + index) % (1 << 63))
    shift = torch.rand((), generator=generator, device=device) - 0.5
    inverse = 1.0 / (SLOPE_SCALE * _scale(rms))
    bins = torch.zeros(GROUPS, 1 << GROUP_BITS, dtype=torch.float64, device=device)
    slope_bins = torch.zeros_like(bins) if on_chunk is not None else None
    size = min(CHUNK, tensor.numel())
    work = torch.float64 if tensor.dtype == torch.float64 else torch.float32
    values_buffer = torch.empty(size, dtype=work, device=device)
    terms_buffer = None if work == torch.float64 else torch.empty(size, dtype=torch.float64, device=device)
    signs_buffer = torch.empty(size, dtype=torch.int32, device=device)
    shift = shift.to(work)
    for (_, part), has_nan in zip(_parts(tensor), nans):
        count = part.numel()
        values = torch.add(shift, part, alpha=inverse, out=values_buffer[:count])
        if on_chunk is not None:
            z, finite, y = values.clone(), torch.isfinite(part), part * inverse
        values.tanh_()
        if has_nan:
            values.nan_to_num_(nan=NAN_TERM)
        terms = values if work == torch.float64 else terms_buffer[:count].copy_(values)
        if on_chunk is not None:
            slope_terms = torch.where(finite, (1 - terms ** 2) * y.double(), 0.0)
        for group in range(GROUPS):
            signs = signs_buffer[:count].random_(0, 1 << GROUP_BITS, generator=generator)
            bins[group].index_add_(0, signs, terms)
            if on_chunk is not None:
                slope_bins[group].index_add_(0, signs, slope_terms)
        if on_chunk is not None:
            del slope_terms
            on_chunk(part, z, y, finite)
            del z, y, finite
    table = _table(device)
    return (bins @ table.T).reshape(-1), (slope_bins @ table.T).reshape(-1) if on_chunk is not None else None


def fingerprint(tensors: list, key: int) -> list[float]:
    """F_1 .. F_m and r (module docstring) of each output tensor in turn ([F_1, .., F_m, r] per
    output, PRINT_WIDTH numbers), for key `key`; the sums NaN only where r itself is not finite
    (float64 squares past its range)."""
    out: list[float] = []
    for index, tensor in enumerate(tensors):
        rms, nans = _rms(tensor)
        if not math.isfinite(rms):
            out += [math.nan] * SUMS + [rms]
            continue
        sums, _ = _keyed(tensor, key, index, rms, nans)
        out += sums.tolist() + [rms]
    return out


def tolerance(tensors: list, protocol: tuple[float, float] | None = None, *, key: int) -> list[float]:
    """What an output that agrees with `tensors` element by element (profiler.measure.verify's
    tolerance: the dtype's, or the protocol's (rtol, atol) where one is given, as the
    candidate's own comparisons use) may show against their fingerprints with key `key`, per
    output (TOLERANCE_WIDTH numbers): U, the bound on the energy of each sum's error (the
    module docstring), how far r may lie from theirs, and G_1 .. G_m, each sum's move per
    unit of r_b / r_a - 1. Computed where the expected outputs are (Model's, in a process of
    their own). An element that is not finite must be matched exactly."""
    import torch

    out: list[float] = []
    for index, tensor in enumerate(tensors):
        rtol, atol, absolute = _tolerances(str(tensor.dtype).removeprefix("torch."), protocol)
        rms, nans = _rms(tensor)
        floor = atol if absolute else atol * (rms if math.isfinite(rms) else 0.0)
        reach = rtol * rms + floor  # how far r of an agreeing output may lie
        r_limit = reach * 1.001 + RMS_ROUNDING * rms + 1e-30
        if not math.isfinite(rms) or (reach > 0 and r_limit >= rms / 2):
            out += [math.inf, r_limit] + [0.0] * SUMS
            continue
        rho_max = rms / (rms - r_limit) if rms > TINY_RMS else 1.0
        move = rho_max - 1  # the largest |r_b / r_a - 1| the r check lets through
        scale = SLOPE_SCALE * _scale(rms)
        rounding = ROUNDING_64 if tensor.dtype == torch.float64 else ROUNDING
        total = [0.0]

        def bound(part, z, y, finite):
            y, z = y.double().abs(), z.double().abs()
            reach_i = rho_max * (rtol * part.double().abs() + floor) / scale
            far = (z - move * y - reach_i).clamp_(min=0.0)
            first = (reach_i / torch.cosh(far) ** 2).clamp_(max=2.0)
            second = torch.minimum(TANH_CURVATURE * (move * y) ** 2, 2.0 + move * y)
            each = torch.where(finite, first + second + rounding, 0.0)
            total[0] += float(torch.dot(each, each))

        _, slopes = _keyed(tensor, key, index, rms, nans, bound)
        energy = (math.sqrt(total[0]) + SUM_ROUNDING * (tensor.numel() + 1)) ** 2
        out += [energy, r_limit] + slopes.tolist()
    return out


def _number(value) -> float | None:
    """A number the candidate's process reported, or None where it is none (JSON gives it
    strings, lists, booleans, integers past float's range)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    try:
        return float(value)
    except OverflowError:
        return None


def disagreement(candidate, expected: list, allowed: list) -> str | None:
    """Why the candidate's fingerprints (as its process reported them) are not Model's, or None.
    Pure Python: the judge's process compares, with numbers from two processes. `expected`
    and `allowed` are fingerprint() and tolerance() of Model's outputs; `candidate` may be
    anything."""
    outputs = len(expected) // PRINT_WIDTH
    if len(expected) != outputs * PRINT_WIDTH or len(allowed) != outputs * TOLERANCE_WIDTH:
        raise ValueError(f"Model's fingerprints ({len(expected)} numbers) and tolerances ({len(allowed)}) "
                         f"are not those of whole outputs")
    if not isinstance(candidate, list) or len(candidate) != len(expected):
        what = f"{len(candidate)} fingerprint numbers" if isinstance(candidate, list) else \
            f"a fingerprint that is a {type(candidate).__name__}, not a list"
        return f"{what}, expected {len(expected)} ({SUMS} keyed sums and r of each of {outputs} outputs)"
    numbers = [_number(value) for value in candidate]
    for position, value in enumerate(numbers):
        if value is None:
            return f"output {position // PRINT_WIDTH}: a fingerprint number that is not a number"
    for output in range(outputs):
        found = _output_disagreement(output, numbers[output * PRINT_WIDTH:(output + 1) * PRINT_WIDTH],
                                     expected[output * PRINT_WIDTH:(output + 1) * PRINT_WIDTH],
                                     allowed[output * TOLERANCE_WIDTH:(output + 1) * TOLERANCE_WIDTH])
        if found is not None:
            return f"output {output}: {found}"
    return None


def _output_disagreement(output: int, got: list[float], want: list[float], allowed: list[float]) -> str | None:
    got_r, want_r = got[SUMS], float(want[SUMS])
    energy, r_limit, slopes = float(allowed[0]), float(allowed[1]), [float(g) for g in allowed[2:]]
    if not math.isfinite(want_r):
        return None  # Model's own r is past float64: nothing of this output proves anything
    if not math.isfinite(got_r) or abs(got_r - want_r) > r_limit:
        return (f"its root mean square is {got_r:.6g} where Model's is {want_r:.6g} "
                f"(at most {r_limit:.3g} apart for outputs within the tolerance)")
    if not all(math.isfinite(value) for value in got[:SUMS]):
        return "its fingerprint holds a sum that is not finite"
    if not energy < math.inf:
        return None  # agreeing outputs may have any scale of their own: r was all there is
    moved = _scale(want_r) / _scale(got_r) - 1
    errors = [g - float(w) - moved * slope for g, w, slope in zip(got[:SUMS], want[:SUMS], slopes)]
    if not all(math.isfinite(error) for error in errors):
        return f"its root mean square {got_r:.6g} puts its sums nowhere near Model's"
    worst = max(range(SUMS), key=lambda j: abs(errors[j]))
    limit = SIGMAS * math.sqrt(energy)
    if not abs(errors[worst]) <= limit:
        return (f"its fingerprint's keyed sum {worst} is {abs(errors[worst]):.3g} from Model's, past the "
                f"{limit:.3g} that outputs within the tolerance reach")
    mean = sum(e * e for e in errors) / SUMS
    if not mean <= KAPPA * energy:
        times = mean / energy if energy > 0 else math.inf
        return (f"its fingerprint's error energy is {times:.3g} times what outputs within the tolerance "
                f"reach (mean square over its {SUMS} keyed sums; at most {KAPPA:.3g} times for them)")
    return None
