"""One-channel (grey) input for an RGB model: its first convolution's kernel summed over
the colour channels, as timm's `adapt_input_conv` does for in_chans=1
(`conv_weight.sum(dim=1, keepdim=True)`; huggingface/pytorch-image-models,
timm/models/_manipulate.py).

A grey image g fed to the RGB model as (g, g, g) meets the first convolution as
sum_c conv(g, W_c) = conv(g, sum_c W_c), so the adapted model on g equals the RGB
model on g replicated to three channels, to float rounding.

A weight-standardised first convolution (NFNets' WSConv2D, tricks/ws_conv.py) applies
W_hat = gain (W - mean) / sqrt(max(N var, eps)) over each output's fan-in N. The RGB
model convolves with W_hat, so the equality needs the adapted layer's standardised
kernel to be sum_c W_hat_c, not the standardisation of the summed kernel S = sum_c W_c.
The two differ by a factor per output unit j: the mean of S over its 3x fewer taps is
3 mean_j, so sum_c W_hat_c = gain_j (S - mean(S)) / sqrt(max(N var_j, eps)), while the
layer computes gain'_j (S - mean(S)) / sqrt(max(N' var(S)_j, eps)) with N' = N / 3.
The layer keeps its standardisation (zero mean over the fan-in, the same form) and the
factor goes into its gain:

    gain'_j = gain_j sqrt(max(N' var(S)_j, eps)) / sqrt(max(N var_j, eps)).

(timm sums the raw kernel of its ScaledStdConv2d and leaves the gain, which changes the
first layer's output scale; this keeps the RGB model's function.)
"""

import numpy as np

from tricks import ws_conv


class AdaptError(ValueError):
  """An RGB model that does not map onto its grey twin."""


def summed_kernel(kernel):
  """An HWIO kernel [h, w, 3, out] summed over its input (colour) channels: [h, w, 1,
  out]."""
  kernel = np.asarray(kernel, np.float64)
  if kernel.ndim != 4 or kernel.shape[2] != 3:
    raise AdaptError(f"a first convolution over RGB has a [h, w, 3, out] kernel, not "
                     f"{list(kernel.shape)}")
  return kernel.sum(axis=2, keepdims=True)


def ws_gain(kernel, gain, eps):
  """The gain that makes the standardised summed kernel equal the sum over colour
  channels of the standardised RGB kernel (see the module docstring)."""
  kernel = np.asarray(kernel, np.float64)
  summed = summed_kernel(kernel)
  rgb = np.maximum(np.prod(kernel.shape[:3]) * kernel.var(axis=(0, 1, 2)), eps)
  grey = np.maximum(np.prod(summed.shape[:3]) * summed.var(axis=(0, 1, 2)), eps)
  return np.asarray(gain, np.float64) * np.sqrt(grey) / np.sqrt(rgb)


def _layers(model):
  """Every layer holding weights, nested models flattened, in order."""
  found = []
  for layer in model.layers:
    if hasattr(layer, "layers") and layer.weights:  # a nested model (Model Garden's)
      found.extend(_layers(layer))
    elif layer.weights:
      found.append(layer)
  return found


def copy_to_grey(rgb, grey):
  """Sets `grey` (the same architecture built for [h, w, 1] input) to `rgb`'s weights,
  with the first convolution's kernel summed over the colour channels (and, for a
  weight-standardised one, its gain corrected); returns `grey`."""
  pairs = list(zip(_layers(rgb), _layers(grey)))
  if len(_layers(rgb)) != len(_layers(grey)):
    raise AdaptError(f"{rgb.name}: the grey model has another set of layers")
  adapted = 0
  for source, target in pairs:
    if len(source.weights) != len(target.weights):
      raise AdaptError(f"{rgb.name}: layer {source.name} differs in its grey twin")
    values = [w.numpy() for w in source.weights]
    shapes = [tuple(w.shape) for w in target.weights]
    if [v.shape for v in values] == shapes:
      target.set_weights(values)
      continue
    kernel_index = next(i for i, w in enumerate(source.weights) if w is source.kernel)
    values[kernel_index] = summed_kernel(values[kernel_index])
    if isinstance(source, ws_conv.WSConv2D):
      gain_index = next(i for i, w in enumerate(source.weights) if w is source.gain)
      values[gain_index] = ws_gain(source.kernel.numpy(), source.gain.numpy(), source.eps)
    if [v.shape for v in values] != shapes:
      raise AdaptError(f"{rgb.name}: layer {source.name} differs in its grey twin beyond "
                       "its input channels")
    target.set_weights([v.astype(w.dtype.as_numpy_dtype) for v, w in
                        zip(values, target.weights)])
    adapted += 1
  if adapted != 1:
    raise AdaptError(f"{rgb.name}: {adapted} layers take the input's channels; a grey input "
                     "adapts exactly one first convolution")
  return grey
