"""The rounds every timed comparison runs: each program once a round, the order flipped
every other round, so slow drift of the machine falls on all alike and each round
pairs the programs (benchmarks/stats.py turns the rounds into medians, intervals and
verdicts)."""


def interleave(runs, rounds, warmup=True, on_result=None):
  """{name: [what runs[name]() returned, one a round]} of `rounds` rounds.

  Args:
    runs: {name: callable} timed by the callable itself (it returns its seconds, or
      the figure it measures).
    rounds: how many rounds.
    warmup: one untimed call of each first (compilation, caches, worker start).
    on_result: called as on_result(round_index, name, result) after each call (a
      progress line).
  """
  if warmup:
    for run in runs.values():
      run()
  results = {name: [] for name in runs}
  names = list(runs)
  for r in range(rounds):
    for name in (names if r % 2 == 0 else names[::-1]):
      results[name].append(runs[name]())
      if on_result:
        on_result(r, name, results[name][-1])
  return results
