"""The input and timm renderers (benchmarks/tables.py) on JSON made by hand; the
committed tables are checked against their JSON by //tests:docs_data_test."""

from absl.testing import absltest

from benchmarks import input_benchmark
from benchmarks import tables


def ratio(value, low, high, verdict):
  return dict(ratio=value, low=low, high=high, rounds=6, verdict=verdict)


class InputTablesTest(absltest.TestCase):

  def setUp(self):
    super().setUp()
    self.results = {"rows": [
        dict(pipeline="train", threads=1, kind="ours", images_per_second=355.4, noise=0.019,
             cores_to_feed_accelerator=6.95,
             over_torchvision=ratio(1.19, 1.1, 1.22, "ahead"),
             over_dali=ratio(0.73, 0.72, 0.8, "behind"),
             over_decode_and_crop=ratio(0.44, 0.39, 0.5, "n/a"),
             over_base=ratio(1.14, 1.06, 1.31, "ahead")),
        dict(pipeline="train", threads=1, kind="torchvision", images_per_second=302.1,
             noise=0.06, cores_to_feed_accelerator=8.2),
        dict(pipeline="train", threads=1, kind="dali", images_per_second=483.2,
             noise=0.04, cores_to_feed_accelerator=5.1),
        dict(pipeline="decode", threads=1, kind="limit", images_per_second=795.6,
             noise=None, cores_to_feed_accelerator=3.1)]}

  def test_peers(self):
    self.assertEqual(tables.input_peers(self.results).splitlines()[2:], [
        "| train | 1 | torchvision | 355 | 302 | 1.19x [1.10, 1.22] | ahead |",
        "| train | 1 | DALI (CPU) | 355 | 483 | 0.73x [0.72, 0.80] | behind |"])

  def test_ours_and_the_limits(self):
    self.assertEqual(tables.input_ours(self.results).splitlines()[2:], [
        "| train | 1 | 355 | 1.9% | 0.44x [0.39, 0.50] | 1.14x [1.06, 1.31] ahead over "
        "train_decode_whole | 7.0 |",
        "| decode | 1 | 796 | n/a | - | - | 3.1 |"])

  def test_the_bases_are_the_benchmarks(self):
    self.assertEqual(tables.INPUT_BASES,
                     {row: base for row, (base, _) in input_benchmark.BASE_OF.items()})
    self.assertEqual([kind for kind, _ in tables.INPUT_PEERS], list(input_benchmark.PEERS))


class ZooTimmTableTest(absltest.TestCase):

  def test_one_model_against_two_settings(self):
    results = {"training": {"resnet50": dict(
        image_size=64, batch_size=32,
        variants={"fp32": dict(images_per_second=73.24, fraction_of_peak=0.662),
                  "timm": dict(images_per_second=57.3),
                  "timm_channels_last": dict(images_per_second=67.9)},
        peers=dict(ours="fp32", timm_best="timm_channels_last", ratios={
            "timm": ratio(1.25, 1.22, 1.29, "ahead"),
            "timm_channels_last": ratio(1.08, 1.05, 1.13, "ahead")}))}}
    self.assertEqual(tables.zoo_timm(results).splitlines()[2:], [
        "| ResNet-50 | 64px, 32 | 73.2 (66%) | default | 57.3 | 1.25x [1.22, 1.29] | ahead |",
        "| | | | channels_last (best) | 67.9 | 1.08x [1.05, 1.13] | ahead |"])
    # (tests/benchmarks/zoo_benchmark_test.py checks TIMM_SETTINGS' keys against the
    # benchmark's; both benchmarks cannot be imported in one process: their flags clash)


def rounds(*seconds):
  return dict(seconds_a_step_each_round=list(seconds))


class ZooFamiliesTableTest(absltest.TestCase):
  """Ratios from paired rounds by hand: at 6 rounds the 95% interval is the rounds'
  range (order statistics j = 1)."""

  def test_every_variant_and_timm(self):
    results = {"training": {
        "resnet50": dict(
            image_size=64, batch_size=32, training_gflops_per_image=1.893,
            variants={"fp32": dict(images_per_second=73.24, fraction_of_peak=0.662,
                                   **rounds(1, 1, 1, 1, 1, 1)),
                      "fp32_xla": rounds(2, 2, 2, 2, 2, 2.5),
                      "bf16": dict(images_per_second=146.5, fraction_of_peak=0.351,
                                   **rounds(.5, .5, .5, .5, .5, .5)),
                      "timm": dict(images_per_second=57.3)},
            peers=dict(ratios={"timm": ratio(1.25, 1.22, 1.29, "ahead")})),
        "nfnet_nano": dict(
            image_size=32, batch_size=32, training_gflops_per_image=0.0152,
            variants={"fp32": dict(images_per_second=1211.0, fraction_of_peak=0.09,
                                   **rounds(1, 1, 1, 1, 1, 1)),
                      "fp32_xla": rounds(.5, .5, .5, .5, .5, 1.5)},
            peers={})}}
    self.assertEqual(tables.zoo_families(results).splitlines()[2:], [
        "| ResNet-50 | 64px, 32 | 1.89 | 73.2 (66%) | 0.50x [0.40, 0.50] behind | "
        "2.00x [2.00, 2.00] ahead | 146 (35%) | 57.3 | 1.25x [1.22, 1.29] ahead |",
        "| NFNet-nano | 32px, 32 | 0.0152 | 1211 (9%) | 2.00x [0.67, 2.00] parity | "
        "- | - | - | - |"])

  def test_inference(self):
    results = {"inference": {"resnet50": {
        "test_size": 224,
        "1": dict(seconds_an_image_each_round=[.1, .1, .125, .1, .1, .1]),
        "32": dict(seconds_an_image_each_round=[.05, .04, .05, .05, .05, .05])}}}
    self.assertEqual(tables.zoo_inference(results).splitlines(), [
        "| model | test size | batch 1: img/s [95%] | batch 32: img/s [95%] |",
        "|---|---|---|---|",
        "| ResNet-50 | 224px | 10.0 [8.0, 10.0] | 20.0 [20.0, 25.0] |"])


class TricksTableTest(absltest.TestCase):

  def test_plain_and_a_trick(self):
    results = {"configs": {
        "plain": dict(seconds=[.9] * 6, time_ratio_interval=ratio(1, 1, 1, "parity"),
                      peak_step_memory_mib=602.4),
        "recompute": dict(seconds=[1.1, 1.2, 1.1, 1.1, 1.3, 1.1],
                          time_ratio_interval=ratio(1.29, 1.23, 1.32, "ahead"),
                          peak_step_memory_mib=315.2)}}
    self.assertEqual(tables.tricks(results).splitlines()[2:], [
        "| plain (fused BatchNorm, constant rate) | 900 [900, 900] | — | — |  | 602 |",
        "| recompute, every block | 1100 [1100, 1300] | 1.29x [1.23, 1.32] | slower | "
        "<= 1.40 | 315 |"])


class TransferLiteTableTest(absltest.TestCase):

  def test_holm_over_the_targets_comparisons(self):
    """Over three draws: scratch is the pixel mean + 0.1 on each, fine-tune scratch +
    0.1, 0.2, 0.3. Fine-tune - scratch: mean 0.2, sd 0.1, t = 3.464 on 2 df, p = 0.0742,
    half-width 4.302653 x 0.1 / sqrt(3) = 0.2484; fine-tune - pixel: 0.3, t = 5.196, p =
    0.0351 (unadjusted, its interval [+0.052, +0.548] leaves out 0). Holm over the
    three: 0 x 3, 0.0351 x 2 = 0.0702, max(0.0702, 0.0742 x 1) = 0.0742: only scratch
    against the pixel mean rejects."""
    runs = []
    for draw, (pixel, gain) in enumerate(((0.20, 0.1), (0.25, 0.2), (0.30, 0.3))):
      for arm, value in (("pixel mean", pixel), ("scratch", pixel + 0.1),
                         ("fine-tune", pixel + 0.1 + gain)):
        runs.append(dict(target="cifar10", k=10, arm=arm, draw=draw,
                         balanced_accuracy=value))
    results = dict(model="efficientnet_lite0", train_size=128, shots=[10], runs=runs)
    self.assertEqual(tables.transfer_lite(results, ["cifar10"]).splitlines(), [
        "| cifar10: k | pixel mean | scratch | fine-tune |", "|---|---|---|---|",
        "| 10 | 0.250 ± 0.050 | 0.350 ± 0.050 | 0.550 ± 0.150 |"])
    self.assertEqual(tables.transfer_lite_verdicts(results, ["cifar10"]).splitlines()[2:], [
        "| 10 | fine-tune − scratch | +0.200 [-0.048, +0.448] | 0.074 | 0.074 | "
        "within noise |",
        "| 10 | scratch − pixel mean | +0.100 [+0.100, +0.100] | < 0.001 | < 0.001 | ahead |",
        "| 10 | fine-tune − pixel mean | +0.300 [+0.052, +0.548] | 0.035 | 0.07 | "
        "within noise |"])

class ReproduceTablesTest(absltest.TestCase):
  """The reproduction renderers over records as //benchmarks:reproduce writes them."""

  def record(self, row, seed, top1, loads, best=None, mixed=False):
    metrics = {"recipe": row, "seed": seed, "top1": top1}
    if best:
      metrics["best_on_test_protocol"] = {"epoch": 187, "top1": best}
    return {"benchmark": "reproduce", "row": row, "seed": seed, "metrics": metrics,
            "revision": "b136e7991937a593e1c41025eb9163ade7b543a0", "mixed_cpus": mixed,
            "ended": "2026-12-02T02:50:36+0000", "machine": "AMD EPYC, 2 logical cores",
            "segments": [{}] * len(loads),
            "load_average": [None if x is None else {"mean": x} for x in loads]}

  def test_runs_and_readme_line(self):
    erm, ldam = "cao2019_cifar10_lt_r100_ce", "cao2019_cifar10_lt_r100_ldam_drw"
    records = [self.record(erm, 0, 0.709, [1.16, None, 2.87]),
               self.record(ldam, 0, 0.765, [1.0], best=0.771, mixed=True)]
    self.assertEqual(tables.reproduce_runs(records).splitlines()[2:], [
        f"| {erm} | 0 | b136e79 | 2026-12-02 | AMD EPYC, 2 logical cores | 3 | "
        "1.16, not recorded, 2.87 | 70.90 | — |",
        f"| {ldam} | 0 | b136e79 | 2026-12-02 | AMD EPYC, 2 logical cores (mixed CPUs) | 1 "
        "| 1.00 | 76.50 | 77.10 (epoch 187) |"])
    line = tables.reproduce_line(records[:1], [erm, ldam])
    self.assertTrue(line.endswith(
        "ResNet-32: ERM (cross-entropy) 70.90 (1 of the 3 seeds its tolerance needs) "
        "against their 70.36; LDAM-DRW not yet run (theirs 77.03)."), line)
    three = [self.record(erm, s, v, [1.0]) for s, v in enumerate((0.70, 0.71, 0.72))]
    self.assertIn("ERM (cross-entropy) 71.00 (3 seeds) against their 70.36; LDAM-DRW "
                  "76.50 (1 of the 3 seeds", tables.reproduce_line(three + records[1:],
                                                                  [erm, ldam]))


if __name__ == "__main__":
  absltest.main()
