"""YAML text of manifests: keys in the order written, no anchors or aliases (each
document reads on its own), long strings kept on one line."""

import yaml


class _Dumper(yaml.SafeDumper):

  def ignore_aliases(self, data):
    return True


def dump(*documents):
  """The documents as one YAML stream (`---` between them)."""
  return yaml.dump_all(documents, Dumper=_Dumper, sort_keys=False, width=10**6)
