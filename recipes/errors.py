"""The error a user can fix: one line naming the problem and the fix."""


class ConfigError(ValueError):
  """Bad input (flag, Gin binding, data, model_dir) detected before training."""
