"""Per-layer-group learning rates against their definition: one optimizer per group,
each at its own rate m_g * eta."""

from absl.testing import parameterized
import numpy as np
import tensorflow as tf
import tf_keras

from tricks import layer_lr

GROUPS = {"head": 1.0, "block2": 0.3, ".*": 0.1}
RATES = {"head": 1.0, "block2": 0.3, "block1": 0.1}


def setUpModule():
  cpu = tf.config.list_physical_devices("CPU")[0]
  tf.config.set_logical_device_configuration(
      cpu, [tf.config.LogicalDeviceConfiguration()] * 2)


def make_variables(seed=0):
  rng = np.random.default_rng(seed)
  return [tf.Variable(rng.normal(size=shape).astype(np.float32), name=name)
          for name, shape in (("block1/kernel", (3, 4)), ("block2/kernel", (4, 4)),
                              ("head/kernel", (4, 2)), ("head/bias", (2,)))]


def gradients(variables, steps, seed=1):
  rng = np.random.default_rng(seed)
  return [[rng.normal(size=v.shape).astype(np.float32) for v in variables]
          for _ in range(steps)]


OPTIMIZERS = {
    "sgd": lambda lr, **kw: tf_keras.optimizers.SGD(lr, **kw),
    "momentum": lambda lr, **kw: tf_keras.optimizers.SGD(lr, momentum=0.9, **kw),
    "nesterov": lambda lr, **kw: tf_keras.optimizers.SGD(lr, momentum=0.9, nesterov=True,
                                                         **kw),
    "adam": lambda lr, **kw: tf_keras.optimizers.Adam(lr, **kw),
    "adamw": lambda lr, **kw: tf_keras.optimizers.AdamW(lr, weight_decay=0.1, **kw),
    "rmsprop": lambda lr, **kw: tf_keras.optimizers.RMSprop(lr, momentum=0.5, **kw),
}


def schedule():
  return tf_keras.optimizers.schedules.PiecewiseConstantDecay([2], [0.05, 0.01])


def reference(make, steps, **kwargs):
  """One optimizer per group, each with its own rate: the definition."""
  variables = make_variables()
  optimizers = {}
  for group, rate in RATES.items():
    scaled = tf_keras.optimizers.schedules.PiecewiseConstantDecay(
        [2], [0.05 * rate, 0.01 * rate])
    optimizers[group] = make(scaled, **kwargs)
  for grads in gradients(variables, steps):
    for group, optimizer in optimizers.items():
      optimizer.apply_gradients([(g, v) for g, v in zip(grads, variables)
                                 if v.name.startswith(group)])
  averages = {}
  for group, optimizer in optimizers.items():
    if kwargs.get("use_ema"):
      mine = [v for v in variables if v.name.startswith(group)]
      trained = [v.numpy() for v in mine]
      optimizer.finalize_variable_values(mine)
      averages.update({v.name: v.numpy() for v in mine})
      for v, value in zip(mine, trained):
        v.assign(value)
  return {v.name: v.numpy() for v in variables}, averages


class LayerLearningRatesTest(tf.test.TestCase, parameterized.TestCase):

  def grouped(self, make, steps, strategy=None, **kwargs):
    strategy = strategy or tf.distribute.get_strategy()
    groups = layer_lr.LayerLearningRates(GROUPS)
    with strategy.scope():
      variables = make_variables()
      optimizer = make(schedule(), **kwargs)
      optimizer.build(variables)
    groups.build(variables)

    @tf.function
    def step(grads):
      def replica_step(grads):
        return groups.apply_gradients(optimizer, zip(grads, variables),
                                      skip_gradients_aggregation=True)
      strategy.run(replica_step, args=(grads,))

    for grads in gradients(variables, steps):
      step([tf.constant(g) for g in grads])
    averages = {}
    if kwargs.get("use_ema"):
      trained = [v.numpy() for v in variables]
      optimizer.finalize_variable_values(variables)
      averages = {v.name: v.numpy() for v in variables}
      for v, value in zip(variables, trained):
        v.assign(value)
    return {v.name: v.numpy() for v in variables}, averages

  @parameterized.named_parameters(*[(name, name) for name in OPTIMIZERS])
  def test_equals_one_optimizer_per_group(self, name):
    want, _ = reference(OPTIMIZERS[name], steps=4)
    got, _ = self.grouped(OPTIMIZERS[name], steps=4)
    for key in want:
      self.assertAllClose(want[key], got[key], rtol=1e-5, atol=1e-6, msg=key)
    start = {v.name: v.numpy() for v in make_variables()}
    self.assertNotAllClose(start["block1/kernel:0"], got["block1/kernel:0"])

  def test_weight_average_is_of_the_scaled_weights(self):
    kwargs = dict(use_ema=True, ema_momentum=0.5)
    want, want_avg = reference(OPTIMIZERS["momentum"], steps=4, **kwargs)
    got, got_avg = self.grouped(OPTIMIZERS["momentum"], steps=4, **kwargs)
    for key in want:
      self.assertAllClose(want[key], got[key], rtol=1e-5, atol=1e-6, msg=key)
      self.assertAllClose(want_avg[key], got_avg[key], rtol=1e-5, atol=1e-6, msg=key)
      self.assertNotAllClose(got[key], got_avg[key])

  def test_mirrored_equals_one_device(self):
    strategy = tf.distribute.MirroredStrategy(["/cpu:0", "/cpu:1"])
    want, _ = reference(OPTIMIZERS["adam"], steps=3)
    got, _ = self.grouped(OPTIMIZERS["adam"], steps=3, strategy=strategy)
    for key in want:
      self.assertAllClose(want[key], got[key], rtol=1e-5, atol=1e-6, msg=key)

  def test_first_matching_group_wins_and_unmatched_keep_the_rate(self):
    groups = layer_lr.LayerLearningRates([("head/bias", 0.0), ("head", 2.0)])
    self.assertEqual(groups.multiplier("head/bias:0"), 0.0)
    self.assertEqual(groups.multiplier("head/kernel:0"), 2.0)
    self.assertEqual(groups.multiplier("block1/kernel:0"), 1.0)
    self.assertEqual(groups.build(make_variables()), {0.0: 1, 2.0: 1, 1.0: 2})

  @parameterized.named_parameters(
      ("empty", {}, "no groups"),
      ("bad_regex", {"(": 1.0}, "not a regex"),
      ("negative", {"head": -1.0}, ">= 0"))
  def test_bad_groups(self, groups, message):
    with self.assertRaisesRegex(ValueError, message):
      layer_lr.LayerLearningRates(groups)

  def test_group_matching_nothing(self):
    with self.assertRaisesRegex(ValueError, "'conv9' matches no trainable variable"):
      layer_lr.LayerLearningRates({"conv9": 0.1}).build(make_variables())


  def test_layer_decay_is_beits_rule(self):
    """BEiT's LayerDecayValueAssigner: values[i] = decay^(num_layers + 1 - i) for the
    num_layers + 2 ids (0 the embedding / stem, num_layers + 1 the head)."""
    names = [["stem/kernel:0", "stem/bias:0"], ["b1/kernel:0"], [], ["b3/kernel:0"],
             ["head/kernel:0", "head/bias:0"]]  # block 2 frozen: no trainable variables
    rates = layer_lr.LayerLearningRates(layer_lr.layer_decay(names, 0.65))
    num_layers = 3
    for layer_id, group in enumerate(names):
      for name in group:
        self.assertAllClose(rates.multiplier(name), 0.65 ** (num_layers + 1 - layer_id),
                            rtol=1e-12, msg=name)
    self.assertEqual(rates.multiplier("head/bias:0"), 1.0)
    self.assertAllClose(rates.multiplier("stem/kernel:0"), 0.65 ** 4)
    self.assertAllClose(rates.multiplier("b3/kernel:0"), 0.65)
    # Whole names only: no prefix or suffix of a name matches.
    self.assertEqual(rates.multiplier("b1/kernel:0_extra"), 1.0)
    self.assertEqual(rates.multiplier("x/b1/kernel:0"), 1.0)
    self.assertLen(layer_lr.layer_decay(names, 0.65), 4)  # the empty group left out
    self.assertEqual([m for _, m in layer_lr.layer_decay(names, 1.0)], [1.0] * 4)
    for bad in (0.0, -0.5, 1.5, "0.7", True):
      with self.assertRaisesRegex(ValueError, "must be a number in \\(0, 1\\]"):
        layer_lr.layer_decay(names, bad)
    with self.assertRaisesRegex(ValueError, "at least a stem and a head"):
      layer_lr.layer_decay([["head/kernel:0"]], 0.5)


if __name__ == "__main__":
  tf.test.main()
