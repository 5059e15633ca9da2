"""SGD with momentum as PyTorch's `torch.optim.SGD` steps (dampening 0).

PyTorch keeps the momentum buffer in gradient units and multiplies by the learning
rate when stepping:

    b <- m b + g;   w <- w - lr b              (nesterov: w <- w - lr (g + m b))

tf_keras's SGD keeps it in step units, v <- m v - lr g; w <- w + v. The two take the
same steps while lr is constant, but after a change of lr (a step decay, a warm-up, a
per-epoch cosine) tf_keras's velocity still carries the old rate: after a x0.01 drop
PyTorch's next step is 0.01 times the buffer, tf_keras's is 0.9 times the old-rate
velocity, and they differ for tens of steps (0.9^k).

Weight decay as PyTorch applies it (g <- g + wd w, before the buffer) is the
project's coupled `Optimization.l2`; tf_keras's decoupled `weight_decay` would decay
a second time and differently, so this optimizer refuses it. The momentum buffers
are the same slots ("m", one a variable) as tf_keras's SGD's, so checkpoints have
the same structure (their values mean different things: lr times apart).

Model Garden's `official.projects.yolo.optimization.sgd_torch.SGDTorch` is not used:
it is a legacy (v1) optimizer, ramps momentum from `momentum_start` over
`warmup_steps` (1000 by default; NaN at 0), applies weight decay only to variables
named "kernel"/"weight" (PyTorch's decays every parameter it is given) and its
`learning_rate` property reads an attribute it does not have.
"""

import tensorflow as tf
import tf_keras


@tf_keras.utils.register_keras_serializable(package="tricks")
class SGDTorch(tf_keras.optimizers.SGD):
  """tf_keras SGD stepping as `torch.optim.SGD(lr, momentum, nesterov=...)`."""

  def __init__(self, learning_rate=0.01, momentum=0.0, nesterov=False, weight_decay=None,
               name="SGDTorch", **kwargs):
    if weight_decay is not None:
      raise ValueError(
          f"SGDTorch weight_decay={weight_decay!r}: PyTorch's weight decay is coupled "
          "(wd * w added to the gradient); set Optimization.l2 instead and leave "
          "weight_decay None")
    super().__init__(learning_rate=learning_rate, momentum=momentum, nesterov=nesterov,
                     weight_decay=None, name=name, **kwargs)

  def update_step(self, gradient, variable):
    lr = tf.cast(self.learning_rate, variable.dtype)
    momentum = tf.cast(self.momentum, variable.dtype)
    buf = self.momentums[self._index_dict[self._var_key(variable)]]
    if isinstance(gradient, tf.IndexedSlices):
      gradient = tf.convert_to_tensor(gradient)  # small embeddings only; dense is exact
    buf.assign(momentum * buf + gradient)
    step = gradient + momentum * buf if self.nesterov else buf
    variable.assign_sub(lr * step)
