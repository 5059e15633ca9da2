"""The closing line of .ci/run: 'N passed, N failed, N skipped' over the test targets
Bazel reported, where a passed target that skipped any of its tests (tf.test's
always-skipped test_session aside) counts as skipped, and each is named with why.

Usage: python3 .ci/summarize.py BAZEL_LOG (in the workspace root, after bazel test).
"""

import os
import re
import sys
import xml.etree.ElementTree as ElementTree

_RESULT = re.compile(r"^(//\S+) +(?:\(cached\) )?(PASSED|FAILED|TIMEOUT|FLAKY|NO STATUS|"
                     r"INCOMPLETE)\b", re.M)
IGNORED = {"test_session"}  # tf.test.TestCase's own, skipped by design


def skipped_tests(label):
  """Names of the tests `label` skipped (from its test.xml), and the log's reasons."""
  package, name = label[2:].split(":")
  folder = os.path.join("bazel-testlogs", package, name)
  names = []
  try:
    tree = ElementTree.parse(os.path.join(folder, "test.xml"))
  except (OSError, ElementTree.ParseError):
    return names, []
  for case in tree.iter("testcase"):
    if case.get("status") == "notrun" and case.get("name") not in IGNORED:
      names.append(case.get("name"))
  reasons = []
  try:
    with open(os.path.join(folder, "test.log"), errors="replace") as f:
      reasons = sorted(set(re.findall(r"^real part missing: (.+)$", f.read(), re.M)))
  except OSError:
    pass
  return names, reasons


def main(log_path):
  with open(log_path, errors="replace") as f:
    results = dict(_RESULT.findall(f.read()))
  passed = failed = skipped = 0
  for label, status in sorted(results.items()):
    if status != "PASSED":
      failed += 1
      continue
    names, reasons = skipped_tests(label)
    if names:
      skipped += 1
      why = "; ".join(reasons) or "see its test.log"
      print(f"skipped: {label}: {len(names)} test(s) ({', '.join(names[:3])}"
            f"{', ...' if len(names) > 3 else ''}): {why}")
    else:
      passed += 1
  print(f"{passed} passed, {failed} failed, {skipped} skipped")
  return passed + skipped


if __name__ == "__main__":
  sys.exit(0 if main(sys.argv[1]) else 3)
