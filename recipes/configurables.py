"""Registers with Gin what recipes configure but that does not import gin itself.

Tricks and tf_keras classes stay free of Gin; the names here are the ones Gin files
use (e.g. `@tf_keras.optimizers.SGD`, `@AdaptiveGradClip()`).
"""

import gin
import tf_keras

from recipes import experiment  # pylint: disable=unused-import  (Task, Optimization, ...)
from recipes import trainer  # pylint: disable=unused-import
from recipes.data import cifar_lt  # pylint: disable=unused-import  (CaoLongTail)
from recipes.data import cifar  # pylint: disable=unused-import  (and cifar_png, cifar_python)
from recipes.data import digits  # pylint: disable=unused-import
from recipes.data import fashion_mnist  # pylint: disable=unused-import
from recipes.data import image_folder  # pylint: disable=unused-import
from recipes.data import list_file  # pylint: disable=unused-import
from recipes.data import long_tail  # pylint: disable=unused-import
from recipes.data import menon_tfrecord  # pylint: disable=unused-import
from recipes.data import pipeline  # pylint: disable=unused-import
from recipes.data import tfds_source  # pylint: disable=unused-import
from recipes.methods import bit_hyperrule  # pylint: disable=unused-import
from recipes.methods import long_tail_heads  # pylint: disable=unused-import  (normed_head, ...)
from recipes.methods import losses  # pylint: disable=unused-import  (registers its builders)
from recipes.methods import schedules  # pylint: disable=unused-import
from tricks import acnet
from tricks import adafactor
from tricks import agc
from tricks import extended_bn
from tricks import max_norm
from tricks import remix
from tricks import sam
from tricks import sampling
from tricks import sgd_torch
from tricks import sm3
from zoo import finetune  # pylint: disable=unused-import  (zoo.finetune_model)
from zoo import nfnet  # pylint: disable=unused-import
from zoo import registry  # pylint: disable=unused-import  (zoo.build)
from zoo import resnet_cifar  # pylint: disable=unused-import
from zoo import transforms

for _optimizer in (tf_keras.optimizers.SGD, tf_keras.optimizers.Adam,
                   tf_keras.optimizers.AdamW):
  gin.external_configurable(_optimizer, module="tf_keras.optimizers")

gin.external_configurable(agc.AdaptiveGradClip, module="tricks")
gin.external_configurable(adafactor.Adafactor, module="tricks")
gin.external_configurable(sm3.SM3, module="tricks")
# Sharpness-aware minimisation (Foret et al. 2021) and ImbSAM, for `Optimization.sam`.
gin.external_configurable(sam.SAM, module="tricks")
gin.external_configurable(sam.ImbSAM, module="tricks")
# Weight balancing's MaxNorm (Alshammari et al. 2022), for
# `Optimization.weight_constraints`.
gin.external_configurable(max_norm.MaxNorm, module="tricks")
# Remix (Chou et al. 2020), for `InputPipeline.remix`.
gin.external_configurable(remix.Remix, module="tricks")
# torch.optim.SGD's momentum step, for the PyTorch-code recipes (runs/pytorch_sgd.gin).
gin.external_configurable(sgd_torch.SGDTorch, module="tricks")
# Class-aware sampling (Kang et al. 2020) and DRS, for `InputPipeline.sampler`.
gin.external_configurable(sampling.Sampler, module="tricks")

# Model rewrites, for `Task.model_transforms`.
gin.external_configurable(extended_bn.swap_batch_norm, module="tricks")
gin.external_configurable(acnet.convert, name="acnet_convert", module="tricks")
gin.external_configurable(acnet.fuse_model, name="acnet_fuse", module="tricks")
# recompute reads the block pattern from the model's zoo card unless bound.
gin.external_configurable(transforms.recompute, module="zoo")
