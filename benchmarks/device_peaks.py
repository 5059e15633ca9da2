"""Accelerators' published dense matrix peaks (//benchmarks:zoo --device).

The figures are the vendors' own, dense (NVIDIA's datasheets give "with sparsity"
figures twice as high; these are half of those), in the dtype a mixed-precision run
computes in: bfloat16 where the device has it, float16 where it does not (V100, T4).
"""

import dataclasses
import re
from typing import Optional


@dataclasses.dataclass(frozen=True)
class Peak:
  """A device's published dense tensor-core (or MXU) rate."""
  device: str  # matched as a whole word in the device's name, case ignored
  dtype: str  # "bfloat16", or "float16" where the device has no bfloat16
  tflops: float
  source: str


PEAKS = (  # the first whose `device` matches wins: specific names before families
    Peak("H100 PCIe", "bfloat16", 756, "NVIDIA H100 Tensor Core GPU datasheet, PCIe"),
    Peak("H100", "bfloat16", 989, "NVIDIA H100 Tensor Core GPU datasheet, SXM"),
    Peak("H200", "bfloat16", 989, "NVIDIA H200 Tensor Core GPU datasheet, SXM"),
    Peak("A100", "bfloat16", 312, "NVIDIA A100 Tensor Core GPU datasheet"),
    Peak("L40S", "bfloat16", 362, "NVIDIA L40S GPU datasheet"),
    Peak("L4", "bfloat16", 121, "NVIDIA L4 Tensor Core GPU datasheet"),
    Peak("V100", "float16", 125, "NVIDIA V100 Tensor Core GPU datasheet, SXM2 "
         "(no bfloat16: float16 tensor cores)"),
    Peak("T4", "float16", 65, "NVIDIA T4 Tensor Core GPU datasheet "
         "(no bfloat16: float16 tensor cores)"),
    Peak("TPU v4", "bfloat16", 275, "Google Cloud TPU documentation, TPU v4"),
    Peak("TPU v5e", "bfloat16", 197, "Google Cloud TPU documentation, TPU v5e"),
    Peak("TPU v5p", "bfloat16", 459, "Google Cloud TPU documentation, TPU v5p"),
)


def published_peak(device_name) -> Optional[Peak]:
  """The `PEAKS` entry for a device name as TensorFlow reports it (e.g. "NVIDIA
  A100-SXM4-40GB", "Tesla V100-SXM2-16GB"), or None for a device not in the table."""
  for peak in PEAKS:
    if re.search(rf"\b{re.escape(peak.device)}\b", device_name, re.IGNORECASE):
      return peak
  return None


def mixed_precision_for(peak: Optional[Peak]):
  """The Keras policy that computes in the peak's dtype (bfloat16 when unknown)."""
  if peak is not None and peak.dtype == "float16":
    return "mixed_float16"
  return "mixed_bfloat16"

