"""Each fine-tuning recipe end to end, CPU-sized: pretrain on digits, then fine-tune from
that checkpoint on a 5-a-class split; it must beat the same model from scratch."""

import os

from absl.testing import parameterized
import gin
import tensorflow as tf
import tf_keras

from recipes import strategies
from recipes import train
from recipes import trainer

# recipe -> (bindings that keep it CPU-sized, pretraining rate). Keras's BN momentum 0.99
# does not settle in a few hundred steps: evaluation would use unsettled moving
# statistics. InceptionV3 pretrained at 0.02 can diverge (balanced accuracy 0.083 after
# 4 epochs, measured here; CI failed this test then); at 0.005 it reaches ~0.8. ResNet-50
# at 0.02 is as fragile: 0.206 before the trainer's rebuild, 0.144 after it (float
# rounding only; the same with a fixed input shape), and fine-tuning from that barely
# beat scratch; at 0.01 it measured 0.387, at 0.005 0.703. Fine-tuned from that at the
# recipe's 0.01 (twice the pretraining rate) it fell to 0.076; at 0.005 0.569, at 0.002
# 0.634: its few-shot runs (tuned and scratch alike) take 0.002.
RECIPES = {
    "resnet50_finetune": (["zoo.build.bn_momentum = 0.9", "LEARNING_RATE = 0.002"], 0.005),
    "inceptionv3_finetune": (["zoo.build.bn_momentum = 0.9"], 0.005),
    "nfnet_finetune": ([], 0.02),
}


class FinetuneRecipesTest(tf.test.TestCase, parameterized.TestCase):

  def tearDown(self):
    gin.clear_config()
    tf_keras.backend.clear_session()
    super().tearDown()

  def run_recipe(self, recipe, model_dir, bindings):
    gin.clear_config()
    tf_keras.backend.clear_session()
    train.parse_config([f"recipes/{recipe}.gin"], ["WEIGHTS = None"] + bindings)
    return trainer.train_and_evaluate(model_dir, strategies.make_strategy("one_device"))

  @parameterized.parameters(*sorted(RECIPES))
  def test_finetuned_beats_scratch(self, recipe):
    tmp = self.get_temp_dir()
    extra, pretrain_rate = RECIPES[recipe]
    no_export = ["Runtime.export_saved_model = False"]  # the tuned run exports
    pre = self.run_recipe(recipe, os.path.join(tmp, "pretrain"), extra + no_export + [
        "SHOTS = 50", "EPOCHS = 4", f"LEARNING_RATE = {pretrain_rate}"])
    few_shot = extra + ["SHOTS = 5", "EPOCHS = 8"]
    scratch = self.run_recipe(recipe, os.path.join(tmp, "scratch"), few_shot + no_export)
    tuned = self.run_recipe(recipe, os.path.join(tmp, "tuned"), few_shot + [
        f"INIT_CHECKPOINT = '{os.path.join(tmp, 'pretrain', 'checkpoints')}'"])
    print(f"{recipe}: pretrained {pre['balanced_accuracy']:.3f}, fine-tuned "
          f"{tuned['balanced_accuracy']:.3f}, scratch {scratch['balanced_accuracy']:.3f}")
    self.assertEqual(tuned["num_train_examples"], 50)
    self.assertGreater(tuned["balanced_accuracy"], scratch["balanced_accuracy"] + 0.1)
    self.assertTrue(os.path.isdir(os.path.join(tmp, "tuned", "export")))


if __name__ == "__main__":
  tf.test.main()
