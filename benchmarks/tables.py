"""Markdown tables of benchmark results, made from the JSON a benchmark writes and
nothing else, so that a page's table can be checked against its committed JSON
(//tests:docs_data_test) and a reader can recompute every figure.

A page marks each such table (the lines up to the next blank line):

    <!-- table: docs/data/<file>.json <renderer>[ methods=a,b] -->
    | ... |

where <renderer> is a function of RENDERERS.
"""

import numpy as np

from benchmarks import reproduction
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


def family_verdicts(results, key="balanced_accuracy"):
  """{method: text} of every method against the baseline, the verdict by Holm over all
  of them (the family is every method the benchmark ran, shown in a table or not):
  '+0.028 ± 0.006 (paired t, 2 df, p = 0.038; Holm over 5: 0.076): within noise'."""
  compared = comparisons(results, key)
  verdicts = stats.holm_verdicts(list(compared.values()))
  family = len([p for p, _ in verdicts if np.isfinite(p)])
  out = {}
  for (method, c), (p, verdict) in zip(compared.items(), verdicts):
    if not np.isfinite(p):
      out[method] = str(c)
      continue
    test = "paired t" if c.paired else "Welch t"
    out[method] = (f"{c.difference:+.3f} ± {c.standard_error:.3f} ({test}, {c.dof:.3g} "
                   f"df, p = {stats.format_p(c.p)}; Holm over {family}: "
                   f"{stats.format_p(p, 3)}): {verdict}")
  return out


def ahead_by_family(results):
  """The methods ahead of the baseline by the family-wise rule."""
  return [m for m, text in family_verdicts(results).items()
          if text.endswith(": " + stats.AHEAD)]


def long_tail(results, methods=None):
  """The table of long_tail.json: one row a method (`methods`: short names or full
  names to keep, in the JSON's order); each verdict by Holm over every method run."""
  compared = family_verdicts(results)
  family = len(comparisons(results))
  lines = [
      "| method | seeds | balanced | many-shot | medium-shot | few-shot | "
      "balanced − cross-entropy (± its standard error; p unadjusted, then adjusted by "
      f"Holm over the {family} methods run; 95%) |",
      "|---|---|---|---|---|---|---|"]
  short = results.get("short_names", {})
  for method, by_seed in results["runs"].items():
    if methods and method not in methods and short.get(method) not in methods:
      continue
    cells = [str(len(by_seed))] + [mean_std(seed_values(results, method, k).values())
                                   for k in METRICS]
    vs = "(baseline)" if method == BASELINE else compared.get(method, "n/a")
    lines.append(f"| {method} | {' | '.join(cells)} | {vs} |")
  return "\n".join(lines)


def long_tail_caption(results):
  return (f"{results['recipe']}, {results['epochs']} epochs, seeds "
          f"{', '.join(results['seeds'])}: test accuracy, mean ± standard deviation over "
          "seeds; against cross-entropy: the mean of the per-seed differences ± its "
          "standard error, a paired t test with n - 1 degrees of freedom, each p "
          "adjusted by Holm over every method run against cross-entropy, verdicts at "
          "a family-wise 95% (benchmarks/stats.py)")


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


# --- Transfer from ImageNet (//benchmarks:transfer) ----------------------------------

def _lite_cells(results, target):
  """{(k, arm): {draw: balanced accuracy}} of a target's runs."""
  cells = {}
  for run in results["runs"]:
    if run["target"] == target:
      cells.setdefault((run["k"], run["arm"]), {})[run["draw"]] = run["balanced_accuracy"]
  return cells


def transfer_lite_comparisons(results, target):
  """[(k, arm, against, Comparison, Holm-adjusted p)]: per k, fine-tune against scratch
  and each probe, and every arm against the pixel mean, paired by draw; Holm over all
  of them (the target's family)."""
  cells = _lite_cells(results, target)
  found = []
  for k in results["shots"]:
    arms = [arm for (kk, arm) in cells if kk == k]
    pairs = [("fine-tune", a) for a in arms if a == "scratch" or a.startswith("probe")]
    pairs += [(a, "pixel mean") for a in arms if a != "pixel mean"]
    for arm, against in pairs:
      if arm in arms and against in arms:
        a, b = cells[(k, arm)], cells[(k, against)]
        draws = sorted(set(a) & set(b))
        found.append((k, arm, against, stats.compare([a[d] for d in draws],
                                                     [b[d] for d in draws], paired=True)))
  adjusted = stats.holm([c.p for *_, c in found])
  return [(*row, p) for row, p in zip(found, adjusted)]


def transfer_lite_caption(results):
  return (f"{results['model']} (ImageNet weights) on each target: balanced test accuracy, "
          f"mean ± sd over draws (one run a draw); scratch and fine-tune at "
          f"{results['train_size']} px. Verdicts: paired t over draws, Holm-adjusted over "
          "every comparison of the target's table (the family), the interval unadjusted "
          "(95%).")


def transfer_lite(results, target):
  """A target's table: k a row, an arm a column (`target`: a name, or the marks'
  methods=[name])."""
  target = target[0] if isinstance(target, list) else target
  cells = _lite_cells(results, target)
  arms = list(dict.fromkeys(arm for (_, arm) in cells))
  lines = [f"| {target}: k | " + " | ".join(arms) + " |",
           "|---|" + "---|" * len(arms)]
  for k in results["shots"]:
    row = [mean_std(cells[(k, a)].values()) if (k, a) in cells else "-" for a in arms]
    lines.append(f"| {k} | " + " | ".join(row) + " |")
  return "\n".join(lines)


def transfer_lite_verdicts(results, target):
  """A target's comparisons with their Holm-adjusted p and verdicts."""
  target = target[0] if isinstance(target, list) else target
  lines = [f"| {target}: k | comparison | difference [95%, unadjusted] | p | Holm p | "
           "verdict |", "|---|---|---|---|---|---|"]
  for k, arm, against, c, p in transfer_lite_comparisons(results, target):
    verdict = (c.verdict if c.n < 2 else
               (stats.AHEAD if c.difference > 0 else stats.BEHIND) if p < 0.05
               else stats.WITHIN_NOISE)
    interval = (f"[{c.low:+.3f}, {c.high:+.3f}]" if np.isfinite(c.low) else "n/a")
    lines.append(f"| {k} | {arm} − {against} | {c.difference:+.3f} {interval} | "
                 f"{stats.format_p(c.p)} | {stats.format_p(p)} | {verdict} |")
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


# --- Published rows re-run (//benchmarks:reproduce's records) ------------------------
# A mark names the records by a glob (docs/data/reproduce/*.json): the renderer gets the
# list, and benchmarks/reproduction.py's rule compares them with published.json.

def _reproduced(records):
  rows = reproduction.published()
  results = [reproduction.result(r, f"{r['row']}_seed{r['seed']}_{r['revision'][:20]}")
             for r in records]
  return rows, reproduction.group(results)


def reproduce(records):
  """Each published row with runs: ours against the paper's and the tolerance."""
  rows, grouped = _reproduced(records)
  return reproduction.rows_table(reproduction.compare(rows, grouped))


def reproduce_gains(records):
  """Each method against its baseline row: ours (Welch, Holm) against the paper's."""
  rows, grouped = _reproduced(records)
  return reproduction.gains_table(reproduction.gains(rows, grouped))


def reproduce_classes(records, recipes):
  """Per-class top-1 (mean over seeds) of `recipes`' runs: rows of one data set."""
  rows, grouped = _reproduced(records)
  rows = [row for row in rows if row["recipe"] in recipes]
  (data, entry), = reproduction.per_class(rows, grouped).items()
  return reproduction.classes_table(data, entry)


def reproduce_runs(records):
  """One line a run: where, when and on what it ran, and what it scored."""
  lines = ["| row | seed | revision | finished | machine | segments | load (1-min mean, "
           "per segment) | top-1 | best test epoch |", "|---|---|---|---|---|---|---|---|---|"]
  for r in sorted(records, key=lambda r: (r["row"], r["seed"])):
    m = r["metrics"]
    loads = ", ".join("not recorded" if load is None else f"{load['mean']:.2f}"
                      for load in r["load_average"])
    machine = r["machine"] + (" (mixed CPUs)" if r["mixed_cpus"] else "")
    best = m.get("best_on_test_protocol")
    lines.append(f"| {r['row']} | {r['seed']} | {r['revision'][:7]} | {r['ended'][:10]} | "
                 f"{machine} | {len(r['segments'])} | {loads} | {100 * m['top1']:.2f} | "
                 + (f"{100 * best['top1']:.2f} (epoch {best['epoch']})" if best else "—")
                 + " |")
  return "\n".join(lines)


def reproduce_line(records, recipes):
  """README's one line: each of `recipes`, ours (seeds) against the paper's."""
  rows, grouped = _reproduced(records)
  by_recipe = {row["recipe"]: row for row in rows}
  compared = {r["label"]: r for r in reproduction.compare(rows, grouped)}
  parts = []
  for recipe in recipes:
    row, ours = by_recipe[recipe], compared.get(recipe)
    if ours is None:
      parts.append(f"{row['method']} not yet run (theirs {row['top1']:.2f})")
      continue
    seeds = (f"{ours['n']} seeds" if ours["n"] >= row["seeds"] else
             f"{ours['n']} of the {row['seeds']} seeds its tolerance needs")
    parts.append(f"{row['method']} {ours['mean']:.2f} ({seeds}) against their "
                 f"{row['top1']:.2f}")
  row = by_recipe[recipes[0]]
  return (f"A published row re-run ([docs/reproduce.md](docs/reproduce.md#the-rows-re-run)):"
          f" {row['paper']}, {row['data']}, {row['model']}: " + "; ".join(parts) + ".")


RENDERERS = {"long_tail": long_tail, "validation_sweep": validation_sweep,
             "nfnet_bf16": nfnet_bf16,
             "trainer": trainer, "input_peers": input_peers, "input_ours": input_ours,
             "zoo_timm": zoo_timm, "zoo_families": zoo_families,
             "zoo_inference": zoo_inference, "tricks": tricks,
             "dct_accuracy": dct_accuracy, "finetune": finetune,
             "transfer_lite": transfer_lite,
             "transfer_lite_verdicts": transfer_lite_verdicts,
             "reproduce": reproduce, "reproduce_gains": reproduce_gains,
             "reproduce_classes": reproduce_classes, "reproduce_runs": reproduce_runs,
             "reproduce_line": reproduce_line}
