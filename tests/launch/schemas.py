"""The schemas generated manifests are checked against (tests/launch/data, sources in
its README.md), and the rules the engines enforce beyond them.

`errors(name, document)` lists a document's schema violations (empty: valid):
  "tfjob": the TFJob CRD's openAPIV3Schema (Kubeflow training-operator v1.9.0), read
    as kubectl's strict field validation does: an unknown field is an error;
  "k8s_indexed_job": the Service and batch/v1 Job fields launch/kubernetes.py uses;
  "k8s_network_policy": networking.k8s.io/v1 NetworkPolicy, whole;
  "vertex_custom_job": the aiplatform v1 CustomJobSpec fields launch/vertex.py uses.
"""

import functools
import json
import os
import re

import jsonschema

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
DATA = os.path.join(ROOT, "tests", "launch", "data")
FILES = {
    "tfjob": "tfjob_crd_schema.json",
    "k8s_indexed_job": "k8s_indexed_job_schema.json",
    "k8s_network_policy": "k8s_network_policy_schema.json",
    "vertex_custom_job": "vertex_custom_job_schema.json",
}


def strict(schema):
  """An OpenAPI v3 structural schema with unknown fields made errors: an object with
  `properties` and neither `additionalProperties` nor
  x-kubernetes-preserve-unknown-fields gets additionalProperties false. (An int-or-
  string field, x-kubernetes-int-or-string, is already anyOf integer / string.)"""
  if isinstance(schema, list):
    return [strict(s) for s in schema]
  if not isinstance(schema, dict):
    return schema
  out = {k: strict(v) if k != "properties" else {p: strict(s) for p, s in v.items()}
         for k, v in schema.items()}
  if "properties" in out and "additionalProperties" not in out and \
      not out.get("x-kubernetes-preserve-unknown-fields"):
    out["additionalProperties"] = False
  return out


@functools.lru_cache(maxsize=None)
def validator(name):
  with open(os.path.join(DATA, FILES[name])) as f:
    schema = json.load(f)
  if name == "tfjob":
    return jsonschema.Draft7Validator(strict(schema))
  jsonschema.Draft202012Validator.check_schema(schema)
  return jsonschema.Draft202012Validator(schema)


def errors(name, document):
  """Each violation as '<path>: <message>'."""
  return [f"{'/'.join(str(p) for p in e.absolute_path) or '.'}: {e.message}"
          for e in validator(name).iter_errors(document)]


_DNS1035 = re.compile(r"^[a-z]([-a-z0-9]{0,61}[a-z0-9])?$")
_TF_REPLICA_TYPES = ("Chief", "Worker", "PS", "Evaluator", "Master")
_RESTART_POLICIES = ("Always", "OnFailure", "Never", "ExitCode")
_CLEAN_POD_POLICIES = ("All", "Running", "None")


def tfjob_operator_errors(tfjob):
  """What training-operator v1.9.0 rejects or ignores beyond the CRD schema: its
  admission webhook (pkg/webhooks/tensorflow/tfjob_webhook.go: a DNS-1035 name, every
  replica an image and a container named `tensorflow`, at most one Chief or Master)
  and its types (pkg/apis/kubeflow.org/v1: replica types, restart and clean-pod
  policies)."""
  found = []
  if not _DNS1035.match(tfjob["metadata"].get("name", "")):
    found.append("metadata.name is not a DNS-1035 label")
  spec = tfjob["spec"]
  if spec.get("runPolicy", {}).get("cleanPodPolicy", "None") not in _CLEAN_POD_POLICIES:
    found.append("runPolicy.cleanPodPolicy is not All, Running or None")
  replicas = spec.get("tfReplicaSpecs") or {}
  if not replicas:
    found.append("tfReplicaSpecs is required")
  if sum(1 for r in replicas if r in ("Chief", "Master")) > 1:
    found.append("more than one Chief or Master")
  for kind, replica in replicas.items():
    if kind not in _TF_REPLICA_TYPES:
      found.append(f"tfReplicaSpecs.{kind} is not a TFJob replica type")
    if replica.get("restartPolicy", "Always") not in _RESTART_POLICIES:
      found.append(f"tfReplicaSpecs.{kind}.restartPolicy is not a TFJob restart policy")
    containers = replica.get("template", {}).get("spec", {}).get("containers", [])
    if not any(c.get("name") == "tensorflow" for c in containers):
      found.append(f"tfReplicaSpecs.{kind} has no container named tensorflow")
    if any(not c.get("image") for c in containers):
      found.append(f"tfReplicaSpecs.{kind} has a container without an image")
  return found
