"""Markdown tables of benchmark results, made from the JSON a benchmark writes and
nothing else, so that a page's table can be checked against its committed JSON
(//tests:docs_data_test) and a reader can recompute every figure.

A page marks each such table (the lines up to the next blank line):

    <!-- table: docs/data/<file>.json <renderer>[ methods=a,b] -->
    | ... |

where <renderer> is a function of RENDERERS.
"""

import numpy as np

from benchmarks import stats

BASELINE = "cross-entropy"
METRICS = ("balanced_accuracy", "many_shot_accuracy", "medium_shot_accuracy",
           "few_shot_accuracy")


# --- Long-tailed recognition (//benchmarks:long_tail) -------------------------------

def seed_values(results, method, key="balanced_accuracy"):
  """{seed: value} of one method's runs (runs without the metric left out)."""
  return {seed: run[key] for seed, run in results["runs"][method].items()
          if run.get(key) is not None}


def mean_std(values):
  """'mean ± sample standard deviation' (3 decimals), or the value of one run."""
  values = list(values)
  if not values:
    return "n/a"
  if len(values) == 1:
    return f"{values[0]:.3f}"
  return f"{np.mean(values):.3f} ± {np.std(values, ddof=1):.3f}"


def comparisons(results, key="balanced_accuracy"):
  """{method: stats.Comparison against the baseline} (the baseline left out)."""
  if BASELINE not in results["runs"]:
    return {}
  base = seed_values(results, BASELINE, key)
  return {m: stats.compare_seeds(seed_values(results, m, key), base)
          for m in results["runs"] if m != BASELINE}


def long_tail(results, methods=None):
  """The table of long_tail.json: one row a method (`methods`: short names or full
  names to keep, in the JSON's order)."""
  compared = comparisons(results)
  lines = [
      "| method | seeds | balanced | many-shot | medium-shot | few-shot | "
      "balanced − cross-entropy (± its standard error; test, 95%) |",
      "|---|---|---|---|---|---|---|"]
  short = results.get("short_names", {})
  for method, by_seed in results["runs"].items():
    if methods and method not in methods and short.get(method) not in methods:
      continue
    cells = [str(len(by_seed))] + [mean_std(seed_values(results, method, k).values())
                                   for k in METRICS]
    vs = "(baseline)" if method == BASELINE else str(compared.get(method, "n/a"))
    lines.append(f"| {method} | {' | '.join(cells)} | {vs} |")
  return "\n".join(lines)


def long_tail_caption(results):
  return (f"{results['recipe']}, {results['epochs']} epochs, seeds "
          f"{', '.join(results['seeds'])}: test accuracy, mean ± standard deviation over "
          "seeds; against cross-entropy: the mean of the per-seed differences ± its "
          "standard error, a paired t test with n - 1 degrees of freedom at 95% "
          "(benchmarks/stats.py)")


# --- Validation sweeps (//benchmarks:validation_sweep) ------------------------------

def sweep_rows(sweep):
  """(point, mean validation balanced accuracy, its values, mean wall seconds) of
  sweep.json, best first."""
  rows = []
  for point in sweep["points"]:
    runs = point["runs"].values()
    accs = [r["validation_balanced_accuracy"] for r in runs]
    walls = [r["wall_seconds"] for r in runs if r["wall_seconds"] is not None]
    rows.append((point["bindings"], float(np.mean(accs)), accs,
                 float(np.mean(walls)) if walls else None))
  return sorted(rows, key=lambda r: -r[1])


def validation_sweep(sweep):
  lines = ["| point | validation balanced (mean) | per seed | wall seconds a run |",
           "|---|---|---|---|"]
  for bindings, mean, accs, wall in sweep_rows(sweep):
    lines.append(f"| {'; '.join(bindings)} | {mean:.4f} | "
                 f"{', '.join(f'{a:.4f}' for a in accs)} | "
                 f"{'n/a' if wall is None else f'{wall:.0f}'} |")
  return "\n".join(lines)


def validation_sweep_caption(sweep):
  return (f"{sweep['recipe']} with {'; '.join(sweep['gin_bindings']) or 'its bindings'}: "
          f"validation balanced accuracy (mean over seeds {', '.join(sweep['seeds'])}), "
          "best first")


# --- Transfer learning (//benchmarks:transfer) ---------------------------------------

TRANSFER_BASELINES = ("scratch", "linear probe")


def cell_values(results, family, target, k, arm, key="balanced_accuracy"):
  """{(draw, seed): value} of one cell of transfer.json."""
  return {(r["draw"], r["seed"]): r[key] for r in results["runs"]
          if (r["family"], r["target"], r["k"], r["arm"]) == (family, target, k, arm)
          and r.get(key) is not None}


def transfer_cells(results):
  """The (family, target, k) cells of transfer.json in the command's order."""
  return sorted({(r["family"], r["target"], r["k"]) for r in results["runs"]},
                key=lambda c: (results["families"].index(c[0]),
                               results["targets"].index(c[1]), c[2]))


def interval(values, confidence=stats.CONFIDENCE):
  """(mean, low, high): the mean of {run: value} and its t interval (n - 1 degrees of
  freedom; low = high = mean for one run), or None for no runs."""
  values = np.array(list(values.values()), float)
  if not values.size:
    return None
  mean = float(np.mean(values))
  if values.size == 1:
    return mean, mean, mean
  half = stats.t_critical(values.size - 1, confidence) * float(
      np.std(values, ddof=1) / np.sqrt(values.size))
  return mean, mean - half, mean + half


def _interval_text(c):
  return f"{c.difference:+.3f} [{c.low:+.3f}, {c.high:+.3f}] {c.verdict}"


def _against(results, cell, arm, baseline):
  if arm == baseline:
    return "—"
  mine, theirs = cell_values(results, *cell, arm), cell_values(results, *cell, baseline)
  common = sorted(set(mine) & set(theirs))
  if not common:
    return "n/a"
  c = stats.compare([mine[p] for p in common], [theirs[p] for p in common], paired=True)
  if c.n < 2:
    return f"{c.difference:+.3f} (1 pair)"
  return _interval_text(c)


def transfer(results, methods=None):
  """The table of transfer.json: a row a family, target, k and arm (`methods`: arms to
  keep); each arm's test accuracy (mean [95% interval] over draws x seeds) and its
  paired difference from scratch and from the linear probe [95% interval] with the
  verdict of benchmarks/stats.py."""
  lines = ["| family | target | k | arm | runs | test accuracy [95%] | − scratch [95%] | "
           "− linear probe [95%] |", "|---|---|---|---|---|---|---|---|"]
  cells = transfer_cells(results)
  for cell in cells:
    for arm in results["arms"]:
      if methods and arm not in methods:
        continue
      values = cell_values(results, *cell, arm)
      if not values:
        continue
      mean, low, high = interval(values)
      accuracy = f"{mean:.3f}" if len(values) == 1 else f"{mean:.3f} [{low:.3f}, {high:.3f}]"
      vs = [_against(results, cell, arm, b) if any(
          r["arm"] == b for r in results["runs"]) else "n/a" for b in TRANSFER_BASELINES]
      lines.append(f"| {cell[0]} | {cell[1]} | {cell[2]} | {arm} | {len(values)} | "
                   f"{accuracy} | {' | '.join(vs)} |")
  return "\n".join(lines)


BY_DRAW_BASELINES = TRANSFER_BASELINES + ("full fine-tune",)


def transfer_by_draw(results, methods=None):
  """The paired differences of `transfer` and `transfer_schedules` (against scratch,
  the probe and the full fine-tune) taken two ways where a cell runs several seeds a
  draw: over the runs as independent (n - 1 df, the tables' rule) and over the
  draws' mean differences (draws - 1 df, stats.compare_by_cluster), which holds
  however much the draw moves the difference. Cells of one seed a draw are left out
  (the two are the same), and a baseline against a later one (that row negated)."""
  lines = ["| family | target | k | arm | against | runs | draws | over runs [95%] | "
           "over draws [95%] |", "|---|---|---|---|---|---|---|---|---|"]
  cells = transfer_cells(results)
  for cell in cells:
    for arm in results["arms"]:
      for baseline in BY_DRAW_BASELINES:
        mirror = arm in BY_DRAW_BASELINES and (
            BY_DRAW_BASELINES.index(arm) < BY_DRAW_BASELINES.index(baseline))
        if arm == baseline or mirror or (methods and arm not in methods):
          continue
        mine = cell_values(results, *cell, arm)
        theirs = cell_values(results, *cell, baseline)
        pairs = sorted(set(mine) & set(theirs))
        draws = [draw for draw, _ in pairs]
        if len(set(draws)) < 2 or len(set(draws)) == len(pairs):
          continue
        a, b = [mine[p] for p in pairs], [theirs[p] for p in pairs]
        runs = stats.compare(a, b, paired=True)
        by_draw = stats.compare_by_cluster(a, b, draws)
        lines.append(f"| {cell[0]} | {cell[1]} | {cell[2]} | {arm} | {baseline} | "
                     f"{len(pairs)} | {len(set(draws))} | {_interval_text(runs)} | "
                     f"{_interval_text(by_draw)} |")
  return "\n".join(lines)


def transfer_schedules(results):
  """Each fine-tuning schedule against the full fine-tune, cell by cell: the mean paired
  difference (same draw and seed) [95% interval] and the verdict of benchmarks/stats.py,
  with each arm's mean final training loss (how far 100 steps fit the draw)."""
  full = "full fine-tune"
  lines = ["| family | target | k | arm | runs | − full fine-tune [95%] | final training loss |",
           "|---|---|---|---|---|---|---|"]
  cells = transfer_cells(results)
  for cell in cells:
    for arm in results["arms"]:
      losses = cell_values(results, *cell, arm, key="final_train_loss")
      if arm in TRANSFER_BASELINES or not losses:
        continue
      loss = f"{np.mean(list(losses.values())):.3f}"
      lines.append(f"| {cell[0]} | {cell[1]} | {cell[2]} | {arm} | {len(losses)} | "
                   f"{_against(results, cell, arm, full)} | {loss} |")
  return "\n".join(lines)


def transfer_rates(results, methods=None):
  """The rate choice of a --learning_rates sweep: for every cell's arm, the mean
  validation accuracy at each rate (over the same draws and seeds) and the rate chosen
  on it; test accuracies take no part."""
  rates = results["learning_rates"]
  label = lambda rate: rate if isinstance(rate, str) else repr(rate)  # as its folder
  lines = ["| family | target | k | arm | runs | " + " | ".join(
      f"validation @ {label(r)}" for r in rates) + " | chosen rate |",
           "|---|---|---|---|---|" + "---|" * len(rates) + "---|"]
  for c in results["rate_choices"]:
    if methods and c["arm"] not in methods:
      continue
    validation = {str(r): v for r, v in c["validation"].items()}  # JSON's keys: strings
    cells = [f"{validation[str(r)]:.3f}" if str(r) in validation else "n/a" for r in rates]
    lines.append(f"| {c['family']} | {c['target']} | {c['k']} | {c['arm']} | {c['runs']} | "
                 + " | ".join(cells) + f" | {label(c['chosen'])} |")
  return "\n".join(lines)


def _source_accuracy(results, name):
  """A family's source test accuracy, or the range over its sources (one a run)."""
  per_run = results.get("source_runs", {}).get(name)
  if not per_run:
    return f"{name}: {results['sources'][name]['balanced_accuracy']:.3f}"
  accuracies = [r["balanced_accuracy"] for r in per_run.values()]
  return (f"{name}: {min(accuracies):.3f} to {max(accuracies):.3f} over {len(accuracies)} "
          "sources, one a (draw, seed) of the pretrained arms")


RUNS_OF = {False: "draws x seeds", True: "runs, each its own draw and seed (draw = seed)"}


def transfer_caption(results):
  sources = "; ".join(_source_accuracy(results, name) for name in results["sources"])
  return (f"Transfer from Fashion-MNIST classes {results['source_classes']} (source test "
          f"accuracy {sources}) to the unseen classes {results['near_classes']} (near) "
          f"and to 8x8 digits at 32 px (far); {results['steps']} steps a run: test "
          f"accuracy, mean over {RUNS_OF[bool(results.get('independent_runs'))]} with its "
          "95% t interval; against scratch and "
          "the linear probe: the mean paired difference (same draw and seed) with its 95% "
          "interval, a paired t test with n - 1 degrees of freedom (benchmarks/stats.py)")


def pixel_centroid(results, methods=None):
  """The no-training reference of transfer.json: the nearest class mean in raw pixels,
  test accuracy over random k-shot draws (mean and 95% t interval)."""
  del methods
  lines = ["| target | k | draws | raw-pixel nearest class mean, test accuracy [95%] |",
           "|---|---|---|---|"]
  for target, by_k in results.get("pixel_centroid", {}).items():
    for k, values in by_k.items():
      mean, low, high = interval(dict(enumerate(values)))
      lines.append(f"| {target} | {k} | {len(values)} | {mean:.3f} [{low:.3f}, {high:.3f}] |")
  return "\n".join(lines)


# --- DCT-scaled decoding's accuracy (//benchmarks:dct_accuracy) -----------------

def dct_accuracy(results):
  """//benchmarks:dct_accuracy's JSON: each arm's mean accuracy on both splits, and
  the paired difference over seeds with its 95% interval, df and verdict."""
  lines = ["| arm | runs | validation accuracy | test accuracy |", "|---|---|---|---|"]
  for arm, splits in results["accuracies"].items():
    means = [np.mean(list(splits[s].values())) for s in ("validation", "test")]
    lines.append(f"| {arm} | {len(splits['test'])} | {means[0]:.4f} | {means[1]:.4f} |")
  for split, c in results["difference"].items():
    lines.append(f"| DCT-scaled - unscaled, {split} | {c['n']} pairs | "
                 f"{c['difference']:+.4f} [{c['low']:+.4f}, {c['high']:+.4f}] | "
                 f"paired t, {c['dof']:g} df, p = {stats.format_p(c['p'])}: "
                 f"{c['verdict']} |")
  return "\n".join(lines)


# --- Timing (benchmarks/stats.py's one rule) ----------------------------------------

def nfnet_bf16(results):
  """//benchmarks:nfnet_bf16's JSON: ms a step of each variant and its speed-up over
  float32, each the median of the rounds with its 95% interval and verdict."""
  lines = ["| model | input, batch | variant | ms a step [95%] | speed-up over float32 "
           "[95%] | verdict |", "|---|---|---|---|---|---|"]
  for name, model in results["models"].items():
    for variant, figures in model["variants"].items():
      ratio = figures["over_float32"]
      lines.append(f"| {name} | {model['image_size']}px, {model['batch_size']} | "
                   f"{variant} | {stats.figure_text(figures['seconds_a_step'], scale=1e3)} | "
                   f"{stats.ratio_text(ratio) if ratio else '-'} | "
                   f"{ratio['verdict'] if ratio else '-'} |")
  return "\n".join(lines)


def trainer(results):
  """//benchmarks:trainer's JSON: the trainer against plain `fit` at each size and at
  each steps_per_loop of the host-overhead model: ms a step (medians) and the paired
  ratio fit / trainer with its 95% interval and verdict (above 1.0: the trainer is
  faster)."""
  lines = ["| step | trainer ms | `fit` ms | fit / trainer [95%] | verdict | noise |",
           "|---|---|---|---|---|---|"]
  rows = [(f"{r['model']} {r['image_size']}px, batch {r['batch_size']}", r)
          for r in results.get("sizes", {}).values()]
  rows += [(f"host overhead, steps_per_loop {n}", r)
           for n, r in results.get("host", {}).items()]
  for label, row in rows:
    ratio = row["fit_over_trainer_interval"]
    lines.append(f"| {label} | {row['trainer_ms_per_step']:.3g} | "
                 f"{row['fit_ms_per_step']:.3g} | {stats.ratio_text(ratio)} | "
                 f"{ratio['verdict']} | {stats.noise_text([row['noise']])} |")
  return "\n".join(lines)


TRICKS = {"plain": ("plain (fused BatchNorm, constant rate)", ""),
          "agc": ("adaptive gradient clipping", "< 1.05"),
          "cyclical_lr": ("cyclical learning rate", "< 1.05"),
          "extended_bn": ("Extended BN in place of fused BN", "< 1.15"),
          "recompute": ("recompute, every block", "<= 1.40")}  # label, the aim for time


# A time ratio's verdict (stats: "ahead" where the plain step is the faster) in words.
_TIME_VERDICT = {"ahead": "slower", "behind": "faster", "parity": "no measurable cost"}


def tricks(results):
  """//benchmarks:tricks's JSON: ms a step of each configuration (the median of the
  rounds with its 95% interval), its time over the plain step's (the median of the
  paired rounds' ratios, its interval and verdict: slower, faster or no measurable
  cost), the aim, and the peak memory one
  step allocates beyond weights and optimizer state."""
  lines = ["| trick | ms a step [95%] | time / plain [95%] | verdict | aim | step memory "
           "MiB |", "|---|---|---|---|---|---|"]
  for name, row in results["configs"].items():
    label, aim = TRICKS.get(name, (name, ""))
    ratio = row["time_ratio_interval"]
    same = name == "plain"
    lines.append(f"| {label} | "
                 f"{stats.median_interval(row['seconds']).format(scale=1e3, digits=0)} | "
                 f"{'—' if same else stats.ratio_text(ratio)} | "
                 f"{'—' if same else _TIME_VERDICT.get(ratio['verdict'], ratio['verdict'])} | "
                 f"{aim} | "
                 f"{row['peak_step_memory_mib']:.0f} |")
  return "\n".join(lines)


# --- The zoo against timm (//benchmarks:zoo --timm_python) -------------------------

TIMM_SETTINGS = (("timm", "default"), ("timm_channels_last", "channels_last"),
                 ("timm_compile", "torch.compile"),
                 ("timm_compile_channels_last", "torch.compile, channels_last"))
ZOO_NAMES = {"nfnet_f0": "NFNet-F0", "resnet50": "ResNet-50", "inception_v3": "InceptionV3",
             "resnet32_cifar": "ResNet-32 (CIFAR)", "nfnet_nano": "NFNet-nano"}


def zoo_timm(results):
  """//benchmarks:zoo's JSON with timm: for each model, ours (its float32 variant: img/s
  and fraction of the machine's matmul peak) against each timm setting it ran: timm's
  img/s and ours / timm, the median of the rounds' ratios with its 95% interval and
  verdict; timm's fastest setting marked (best)."""
  lines = ["| model | input, batch | ours img/s (of peak) | timm setting | timm img/s | "
           "ours / timm [95% interval] | verdict |", "|---|---|---|---|---|---|---|"]
  for name, case in results["training"].items():
    peers = case["peers"]
    ours = case["variants"][peers["ours"]]
    first = True
    for key, label in TIMM_SETTINGS:
      if key not in peers["ratios"]:
        continue
      ratio = peers["ratios"][key]
      best = " (best)" if key == peers["timm_best"] else ""
      head = (f"| {ZOO_NAMES.get(name, name)} | {case['image_size']}px, "
              f"{case['batch_size']} | {ours['images_per_second']:.1f} "
              f"({ours['fraction_of_peak']:.0%}) |" if first else "| | | |")
      lines.append(f"{head} {label}{best} | "
                   f"{case['variants'][key]['images_per_second']:.1f} | "
                   f"{stats.ratio_text(ratio)} | {ratio['verdict']} |")
      first = False
  return "\n".join(lines)


def _speed_up(case, variant, over="fp32"):
  """`variant`'s speed over `over`'s from a training case's paired rounds (JSON)."""
  rounds = case["variants"]
  return stats.ratio_interval(ours=rounds[variant]["seconds_a_step_each_round"],
                              theirs=rounds[over]["seconds_a_step_each_round"]).as_dict()


def _rate(images_per_second):
  """Images a second as the zoo tables print them: whole above 100, else 3 figures."""
  return (f"{images_per_second:.0f}" if images_per_second >= 100
          else f"{images_per_second:.3g}")


def zoo_families(results):
  """//benchmarks:zoo's JSON, every family: GFLOP an image; float32 img/s (fraction of
  the machine's float32 matmul rate); XLA's and bfloat16's speed over float32 and
  bfloat16's fraction of the bfloat16 rate; timm's default and ours / timm (our faster
  float32 variant), each ratio the median of the paired rounds' with its 95% interval
  and verdict; '-' where a case has no such variant or peer."""
  lines = ["| model | input, batch | GFLOP / image | float32 img/s (of peak) | "
           "XLA / float32 [95%] | bfloat16 / float32 [95%] | bfloat16 img/s (of peak) | "
           "timm img/s | ours / timm [95%] |", "|---|---|---|---|---|---|---|---|---|"]
  for name, case in results["training"].items():
    v = case["variants"]
    cells = [f"{_rate(v['fp32']['images_per_second'])} ({v['fp32']['fraction_of_peak']:.0%})"]
    for variant in ("fp32_xla", "bf16"):
      ratio = _speed_up(case, variant) if variant in v else None
      cells.append(f"{stats.ratio_text(ratio)} {ratio['verdict']}" if ratio else "-")
    cells.append(f"{_rate(v['bf16']['images_per_second'])} ({v['bf16']['fraction_of_peak']:.0%})"
                 if "bf16" in v else "-")
    ratio = (case.get("peers") or {}).get("ratios", {}).get("timm")
    cells += ([_rate(v['timm']['images_per_second']),
               f"{stats.ratio_text(ratio)} {ratio['verdict']}"] if ratio else ["-", "-"])
    lines.append(f"| {ZOO_NAMES.get(name, name)} | {case['image_size']}px, "
                 f"{case['batch_size']} | {case['training_gflops_per_image']:.3g} | "
                 + " | ".join(cells) + " |")
  return "\n".join(lines)


def zoo_inference(results):
  """//benchmarks:zoo's JSON, SavedModel inference: images a second at each batch size,
  the median of the rounds with its 95% interval."""
  batches = sorted({b for row in results["inference"].values() for b in row
                    if b != "test_size"}, key=int)
  lines = ["| model | test size | " + " | ".join(f"batch {b}: img/s [95%]" for b in batches)
           + " |", "|---|---|" + "---|" * len(batches)]
  for name, row in results["inference"].items():
    cells = [stats.median_interval([1 / t for t in row[b]["seconds_an_image_each_round"]])
             .format() for b in batches]
    lines.append(f"| {ZOO_NAMES.get(name, name)} | {row['test_size']}px | "
                 + " | ".join(cells) + " |")
  return "\n".join(lines)


# --- The input pipeline (//benchmarks:input) -----------------------------------------

INPUT_PEERS = (("torchvision", "torchvision"), ("torchvision_simd", "torchvision, Pillow-SIMD"),
               ("dali", "DALI (CPU)"))
# The row each row that changes one thing of another is set against
# (input_benchmark.BASE_OF's, checked equal in tests/benchmarks/tables_test.py).
INPUT_BASES = {"train": "train_decode_whole", "eval": "eval_decode_whole",
               "train_dct_scaling": "train", "train_uint8": "train",
               "train_randaugment": "train_randaugment_per_image"}


def input_peers(results):
  """//benchmarks:input's JSON: each of our pipelines against each peer that has it, at
  each thread count: images a second (medians) and ours / theirs, the median of the
  rounds' ratios with its 95% interval and verdict."""
  lines = ["| pipeline | threads | peer | ours img/s | peer img/s | ours / peer [95%] | "
           "verdict |", "|---|---|---|---|---|---|---|"]
  rates = {(r["pipeline"], r["threads"], r["kind"]): r["images_per_second"]
           for r in results["rows"]}
  for row in results["rows"]:
    for kind, label in INPUT_PEERS:
      ratio = row.get(f"over_{kind}")
      if row["kind"] == "ours" and ratio:
        lines.append(f"| {row['pipeline']} | {row['threads']} | {label} | "
                     f"{row['images_per_second']:.0f} | "
                     f"{rates[(row['pipeline'], row['threads'], kind)]:.0f} | "
                     f"{stats.ratio_text(ratio)} | {ratio['verdict']} |")
  return "\n".join(lines)


def input_ours(results):
  """//benchmarks:input's JSON: our pipelines and the decode limits: images a second
  (the median, its noise), the fraction of the decode-and-crop limit (rows on `train`'s
  boxes) and, for a row that changes one thing of another, the ratio to it, each with
  its 95% interval; and the cores that feed one accelerator at the row's rate."""
  lines = ["| pipeline | threads | img/s | noise | / decode-and-crop [95%] | "
           "/ its base [95%] | cores / accelerator |", "|---|---|---|---|---|---|---|"]
  base = lambda row: f" over {INPUT_BASES[row['pipeline']]}"
  for row in results["rows"]:
    if row["kind"] not in ("ours", "limit"):
      continue
    cells = [stats.ratio_text(row[key]) + (f" {row[key]['verdict']}{base(row)}"
                                           if key == "over_base" else "")
             if key in row else "-" for key in ("over_decode_and_crop", "over_base")]
    lines.append(f"| {row['pipeline']} | {row['threads']} | "
                 f"{row['images_per_second']:.0f} | {stats.noise_text([row['noise']])} | "
                 f"{cells[0]} | {cells[1]} | {row['cores_to_feed_accelerator']:.1f} |")
  return "\n".join(lines)


# --- A fine-tuning recipe against scratch and its probe (//benchmarks:finetune) -----

FINETUNE_ARM = "fine-tune"
FINETUNE_CONFIDENCE = 1 - (1 - stats.CONFIDENCE) / 2  # Bonferroni over two comparisons


def finetune_verdicts(results):
  """{arm: stats.Comparison of the fine-tune arm against it} over the seeds (paired),
  each at the Bonferroni level for the table's comparisons."""
  of = lambda arm: seed_values(results, arm)
  return {arm: stats.compare_seeds(of(FINETUNE_ARM), of(arm),
                                   confidence=FINETUNE_CONFIDENCE)
          for arm in results["runs"] if arm != FINETUNE_ARM}


def finetune(results):
  """Each arm's balanced test accuracy (mean ± sd, each seed) and fine-tune minus it."""
  verdicts = finetune_verdicts(results)
  lines = [f"| arm | seeds | balanced accuracy | per seed | fine-tune − arm "
           f"({FINETUNE_CONFIDENCE:.1%} paired t, Bonferroni over {len(verdicts)}) |",
           "|---|---|---|---|---|"]
  for arm in results["runs"]:
    values = seed_values(results, arm)
    c = verdicts.get(arm)
    lines.append(
        f"| {arm} | {len(values)} | {mean_std(values.values())} | "
        + ", ".join(f"{values[s]:.3f}" for s in sorted(values, key=int)) + " | "
        + (f"{c.difference:+.3f} [{c.low:+.3f}, {c.high:+.3f}], p "
           + ("" if stats.format_p(c.p).startswith("<") else "= ")
           + f"{stats.format_p(c.p)}: {c.verdict}" if c else "—") + " |")
  return "\n".join(lines)


RENDERERS = {"long_tail": long_tail, "validation_sweep": validation_sweep,
             "transfer": transfer, "transfer_schedules": transfer_schedules,
             "transfer_rates": transfer_rates, "transfer_by_draw": transfer_by_draw,
             "pixel_centroid": pixel_centroid, "nfnet_bf16": nfnet_bf16,
             "trainer": trainer, "input_peers": input_peers, "input_ours": input_ours,
             "zoo_timm": zoo_timm, "zoo_families": zoo_families,
             "zoo_inference": zoo_inference, "tricks": tricks,
             "dct_accuracy": dct_accuracy, "finetune": finetune}
