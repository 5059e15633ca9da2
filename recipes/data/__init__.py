"""Data sources, the long-tail profile and the tf.data input pipeline."""
