"""The project's one rule for calling a difference real, over seeds and over rounds.

Over seeds (accuracy of a method against a baseline): Student's t test at a stated
confidence (95%), paired where the runs are paired (the same seed on both sides: the
same initialisation, validation hold-out and data order), with n - 1 degrees of freedom
(Student 1908); Welch's unequal-variance test otherwise, with the Welch-Satterthwaite
degrees of freedom (Welch 1947). Where paired runs share a cluster (the seeds of one
k-shot draw), the paired test over the clusters' mean differences, with clusters - 1
degrees of freedom (`compare_by_cluster`). The verdict words mean one thing everywhere:

- "ahead": the confidence interval of the difference lies above 0,
- "behind": it lies below 0,
- "within noise": it holds 0 (equivalently, the two-sided p-value is at least
  1 - confidence).

Over timing rounds (how many times faster one program is than another): the rounds
are paired (both run in the same round, alternated), each round gives one ratio, and
the interval of the median ratio comes from order statistics (the sign test's
distribution-free interval, e.g. Conover 1999, sec. 3.2): with n ratios sorted, the
interval [r_(j), r_(n+1-j)] holds the median with probability
1 - 2 P(Binomial(n, 1/2) < j), and j is the largest that keeps that at least the
confidence. Below 6 rounds no such interval reaches 95%. "ahead" / "behind" /
"parity" as above, with 1.0 in place of 0. A single program's figure over rounds
(milliseconds a step) is its median with the same interval, and its "noise" is that
interval's half-width over the median: one formula in every benchmark
(`median_interval`), printed as "26.4 [25.9, 27.1]", a ratio as "1.31x [1.25, 1.40]".
The rounds themselves are run by `benchmarks.rounds.interleave` (every program once a
round, the order flipped every other round).
"""

import dataclasses
import functools
import math

import numpy as np
from scipy import stats as scipy_stats

CONFIDENCE = 0.95
AHEAD, BEHIND, WITHIN_NOISE, PARITY = "ahead", "behind", "within noise", "parity"
NO_ESTIMATE = "fewer than 2 runs a side: no noise estimate"
TOO_FEW_ROUNDS = "no verdict: too few rounds for a 95% interval"
# What every timing table says of its figures.
TIMING_RULE = ("each figure: the median of the rounds and its 95% interval from order "
               "statistics, noise = the interval's half-width over the median; a ratio "
               "is ahead or behind only where its interval leaves out 1.0, from 6 rounds "
               "or more; rounds alternate every program, the order flipped every other "
               "round")


@dataclasses.dataclass(frozen=True)
class Comparison:
  """`a` against `b` over seeds: the difference of means (paired: the mean of the
  per-seed differences), its standard error, the t statistic, degrees of freedom,
  two-sided p-value, the confidence interval of the difference and the verdict."""
  difference: float
  standard_error: float
  t: float
  dof: float
  p: float
  low: float
  high: float
  paired: bool
  n: int  # runs a side (paired: pairs)
  confidence: float
  verdict: str

  def as_dict(self):
    return {k: (None if isinstance(v, float) and not math.isfinite(v) else v)
            for k, v in dataclasses.asdict(self).items()}

  def __str__(self):
    """E.g. '+0.031 ± 0.004 (paired t, 2 df, p = 0.006): ahead'; ± is the standard
    error of the difference."""
    if not math.isfinite(self.standard_error):
      return f"{self.difference:+.3f}: {self.verdict}"
    test = "paired t" if self.paired else "Welch t"
    return (f"{self.difference:+.3f} ± {self.standard_error:.3f} ({test}, "
            f"{self.dof:.3g} df, p = {format_p(self.p)}): {self.verdict}")


def format_p(p, digits=2):
  """'0.038', '< 0.001' or 'n/a'; `digits` significant (3 where a threshold is near:
  an adjusted 0.0505 must not read 0.05)."""
  if not math.isfinite(p):
    return "n/a"
  return f"{p:.{digits}g}" if p >= 0.001 else "< 0.001"


def t_critical(dof, confidence=CONFIDENCE):
  """The two-sided critical value of Student's t with `dof` degrees of freedom."""
  if not dof > 0:
    raise ValueError(f"degrees of freedom must be positive, got {dof}")
  return float(scipy_stats.t.ppf(0.5 + confidence / 2, dof))


def _verdict(low, high, zero=0.0, within=WITHIN_NOISE):
  if low > zero:
    return AHEAD
  if high < zero:
    return BEHIND
  return within


def compare(a, b, paired, confidence=CONFIDENCE):
  """`a` against `b` (sequences of a metric, one value a run) by the rule above.

  paired: a[i] and b[i] come from the same seed (then len(a) == len(b)).
  A NaN or infinite value raises ValueError (it would make every figure NaN).
  """
  a, b = np.asarray(a, float), np.asarray(b, float)
  if a.ndim != 1 or b.ndim != 1:
    raise ValueError("compare takes two flat sequences of values, one a run")
  if paired and a.shape != b.shape:
    raise ValueError(f"paired runs need as many values a side, got {a.size} and {b.size}")
  for side, values in (("a", a), ("b", b)):
    bad = np.flatnonzero(~np.isfinite(values))
    if bad.size:
      raise ValueError(f"compare takes finite values, one a run; {side} has "
                       f"{values[bad[0]]} at run {bad[0]}: leave a run without its "
                       "metric out instead")
  nan = float("nan")
  if paired:
    d = a - b
    n = d.size
    diff = float(np.mean(d)) if n else nan
    if n < 2:
      return Comparison(diff, nan, nan, nan, nan, nan, nan, True, n, confidence,
                        NO_ESTIMATE)
    se = float(np.std(d, ddof=1) / math.sqrt(n))
    dof = float(n - 1)
  else:
    n = min(a.size, b.size)
    diff = float(np.mean(a) - np.mean(b)) if n else nan
    if n < 2:
      return Comparison(diff, nan, nan, nan, nan, nan, nan, False, n, confidence,
                        NO_ESTIMATE)
    va, vb = np.var(a, ddof=1) / a.size, np.var(b, ddof=1) / b.size
    se = float(math.sqrt(va + vb))
    # Welch-Satterthwaite; both variances 0 leave it undefined: the smaller n - 1.
    dof = (float((va + vb) ** 2 / (va ** 2 / (a.size - 1) + vb ** 2 / (b.size - 1)))
           if va + vb > 0 else float(min(a.size, b.size) - 1))
  if se == 0:  # every run the same difference: no noise to compare it with
    t = 0.0 if diff == 0 else math.copysign(math.inf, diff)
    p = 1.0 if diff == 0 else 0.0
    return Comparison(diff, 0.0, t, dof, p, diff, diff, paired, n, confidence,
                      _verdict(diff, diff))
  t = diff / se
  p = float(2 * scipy_stats.t.sf(abs(t), dof))
  half = t_critical(dof, confidence) * se
  return Comparison(diff, se, t, dof, p, diff - half, diff + half, paired, n, confidence,
                    _verdict(diff - half, diff + half))


def compare_by_cluster(a, b, clusters, confidence=CONFIDENCE):
  """`a` against `b` paired run by run, where runs that share a cluster (a k-shot draw
  run under several seeds) are not independent: the paired differences are averaged
  within each cluster and the t test runs over the cluster means, with (clusters - 1)
  degrees of freedom (the analysis of cluster means; Donner and Klar 2000, ch. 6).
  Exact under a normal random effect of the cluster, however large, with as many runs
  in every cluster; the run-level rule (`compare`, n - 1 df) holds only when that
  effect is nil.

  clusters: one label a run, as many as `a` and `b` have values.
  """
  a, b = np.asarray(a, float), np.asarray(b, float)
  if not a.shape == b.shape == (len(clusters),):
    raise ValueError(f"one cluster a pair, got {a.size} and {b.size} values and "
                     f"{len(clusters)} clusters")
  labels = list(dict.fromkeys(clusters))
  mean_of = lambda values, label: float(np.mean(
      [v for v, c in zip(values, clusters) if c == label]))
  return compare([mean_of(a, c) for c in labels], [mean_of(b, c) for c in labels],
                 paired=True, confidence=confidence)


def compare_seeds(a, b, confidence=CONFIDENCE):
  """`a` against `b` given as {seed: value}: paired when both have the same seeds
  (common random numbers), Welch otherwise."""
  if set(a) == set(b):
    seeds = sorted(a)
    return compare([a[s] for s in seeds], [b[s] for s in seeds], paired=True,
                   confidence=confidence)
  return compare(list(a.values()), list(b.values()), paired=False, confidence=confidence)


def holm(p_values):
  """Holm's step-down adjusted p-values (Holm 1979, "A simple sequentially rejective
  multiple test procedure"), in the order given: with the m p-values sorted, the j-th
  smallest (j from 1) is adjusted to max over i <= j of min(1, (m - i + 1) p_(i)).
  Rejecting where the adjusted p is below alpha holds the family-wise error rate at
  alpha over the m comparisons, whatever their dependence. A NaN (no estimate) stays
  NaN and is left out of the family."""
  p = np.asarray(p_values, float)
  if p.ndim != 1:
    raise ValueError("holm takes a flat sequence of p-values, one a comparison")
  known = np.flatnonzero(np.isfinite(p))
  if np.any((p[known] < 0) | (p[known] > 1)):
    raise ValueError(f"p-values lie in [0, 1], got {p[known].tolist()}")
  adjusted = np.full(p.shape, np.nan)
  order = known[np.argsort(p[known], kind="stable")]
  m, running = len(order), 0.0
  for rank, index in enumerate(order):
    running = max(running, min(1.0, (m - rank) * p[index]))
    adjusted[index] = running
  return adjusted.tolist()


def holm_verdicts(comparisons):
  """[(Holm-adjusted p, verdict)] of a family of Comparisons, in the order given: the
  verdict words of the module at the family-wise level (each comparison's own
  confidence): "ahead" / "behind" where the adjusted p is below 1 - confidence, else
  "within noise"; a comparison without an estimate keeps its own verdict (NO_ESTIMATE)
  and stays out of the family."""
  adjusted = holm([c.p for c in comparisons])
  out = []
  for c, p in zip(comparisons, adjusted):
    if not math.isfinite(p):
      out.append((p, c.verdict))
    elif p < 1 - c.confidence:
      out.append((p, AHEAD if c.difference > 0 else BEHIND))
    else:
      out.append((p, WITHIN_NOISE))
  return out


@functools.lru_cache(maxsize=None)
def order_statistic_rank(n, confidence=CONFIDENCE):
  """The largest j (1-based) with P(r_(j) <= median <= r_(n+1-j)) >= confidence for n
  i.i.d. draws of a continuous variable, and that coverage; (0, 0.0) when even the
  whole range falls short."""
  best = (0, 0.0)
  for j in range(1, n // 2 + 1):
    coverage = 1 - 2 * float(scipy_stats.binom.cdf(j - 1, n, 0.5))
    if coverage >= confidence:
      best = (j, coverage)
  return best


@dataclasses.dataclass(frozen=True)
class MedianInterval:
  """A figure over rounds (seconds a step, images a second): the median of the rounds
  and its distribution-free interval; `noise` is the interval's half-width over the
  median's size (NaN where the rounds are too few for an interval, or the median is 0)."""
  median: float
  low: float
  high: float
  coverage: float  # the interval's exact coverage (at least `confidence`)
  confidence: float
  rounds: int

  @property
  def noise(self):
    if not self.coverage or not self.median:
      return math.nan
    return (self.high - self.low) / 2 / abs(self.median)

  def format(self, scale=1.0, digits=1):
    """E.g. '26.4 [25.9, 27.1]' (the median and its 95% interval, times `scale`)."""
    return figure_text(self.as_dict(), scale, digits)

  def as_dict(self):
    return {"median": self.median, "low": _round_or_none(self.low, None),
            "high": _round_or_none(self.high, None), "coverage": round(self.coverage, 4),
            "confidence": self.confidence, "rounds": self.rounds,
            "noise": _round_or_none(self.noise, 4)}


def figure_text(figure, scale=1.0, digits=1):
  """A MedianInterval's JSON (`as_dict`) as every table prints it, times `scale`:
  '26.4 [25.9, 27.1]'."""
  median = f"{figure['median'] * scale:.{digits}f}"
  if figure["low"] is None:
    return f"{median} [no 95% interval from {figure['rounds']} rounds]"
  return f"{median} [{figure['low'] * scale:.{digits}f}, {figure['high'] * scale:.{digits}f}]"


def ratio_text(ratio):
  """A RatioInterval's JSON (`as_dict`) as every table prints it: '1.31x [1.25, 1.40]'."""
  if ratio["low"] is None:
    return f"{ratio['ratio']:.2f}x [no 95% interval from {ratio['rounds']} rounds]"
  return f"{ratio['ratio']:.2f}x [{ratio['low']:.2f}, {ratio['high']:.2f}]"


def largest_noise(figures):
  """The largest noise of several figures, each a list of rounds, as JSON holds it:
  None if any has too few rounds for an interval."""
  noises = [median_interval(rounds).noise for rounds in figures]
  return None if any(math.isnan(n) for n in noises) else round(max(noises), 4)


def noise_text(noises):
  """The largest of `noises` (MedianInterval.noise, or its JSON: None where there was
  no interval) as a table prints it: '3.1%', or 'n/a' if any has no interval."""
  noises = [math.nan if n is None else n for n in noises]
  if not noises or any(math.isnan(n) for n in noises):
    return "n/a"
  return f"{max(noises):.1%}"


def median_interval(values, confidence=CONFIDENCE):
  """The median of `values` (one a round) and the order-statistic interval
  [v_(j), v_(n+1-j)] that holds the population median with probability at least
  `confidence` (NaN bounds below 6 rounds at 95%)."""
  values = np.sort(np.asarray(values, float))
  if values.ndim != 1 or not values.size or not np.all(np.isfinite(values)):
    raise ValueError(f"need one finite value a round, got {values!r}")
  n = values.size
  j, coverage = order_statistic_rank(n, confidence)
  low, high = (float(values[j - 1]), float(values[n - j])) if j else (math.nan, math.nan)
  return MedianInterval(float(np.median(values)), low, high, coverage, confidence, n)


@dataclasses.dataclass(frozen=True)
class RatioInterval(MedianInterval):
  """How many times faster "ours" is than a peer over paired rounds: the median of the
  per-round ratios theirs / ours and its distribution-free interval."""

  @property
  def ratio(self):
    return self.median

  @property
  def verdict(self):
    if not self.coverage:
      return TOO_FEW_ROUNDS
    return _verdict(self.low, self.high, zero=1.0, within=PARITY)

  def __str__(self):
    """E.g. '1.31x [1.25, 1.40]' (the median ratio and its 95% interval)."""
    return ratio_text(self.as_dict())

  def as_dict(self):
    return {"ratio": round(self.ratio, 4), "low": _round_or_none(self.low),
            "high": _round_or_none(self.high), "coverage": round(self.coverage, 4),
            "confidence": self.confidence, "rounds": self.rounds,
            "verdict": self.verdict}


def _round_or_none(x, digits=4):
  """`x` rounded (not at all for digits None), None for NaN (JSON has no NaN)."""
  if not math.isfinite(x):
    return None
  return x if digits is None else round(x, digits)


def ratio_interval(ours, theirs, confidence=CONFIDENCE):
  """Speed of `ours` over `theirs` from paired rounds of seconds (ours[i] and
  theirs[i] timed in the same round): each round's ratio theirs[i] / ours[i], their
  median, and the order-statistic interval of the median (NaN bounds below 6 rounds
  at 95%)."""
  ours, theirs = np.asarray(ours, float), np.asarray(theirs, float)
  if ours.shape != theirs.shape or ours.ndim != 1 or not ours.size:
    raise ValueError(f"need equally many rounds of each, got {ours.shape} and "
                     f"{theirs.shape}")
  if np.any(ours <= 0) or np.any(theirs <= 0):
    raise ValueError("times must be positive")
  return RatioInterval(**dataclasses.asdict(median_interval(theirs / ours, confidence)))
