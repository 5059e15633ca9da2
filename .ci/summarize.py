"""The closing line of .ci/run: 'N passed, N failed, N skipped' over the test targets
Bazel reported, where a passed target that skipped any of its tests (tf.test's
always-skipped test_session aside) counts as skipped, and each is named with why.
Before it, given the targets' sizes, a line for each target that took more than a
third of its size's timeout (its slowest shard or run; docs/developing.md), and a line
for each target marked flaky that failed before it passed (it counts as passed, as it
does to Bazel; the failed attempts' logs are named).

Usage: python3 .ci/summarize.py BAZEL_LOG [SIZES] (in the workspace root, after bazel
test; SIZES: lines "LABEL SIZE", as `bazel query "attr(size, S, tests(//...))"` gives);
python3 .ci/summarize.py --sizes prints the sizes (TIMEOUTS' keys) .ci/run queries.
"""

import os
import re
import sys
import xml.etree.ElementTree as ElementTree

# Bazel 4.2.3's summary lines: "//a:b  PASSED in 3.1s", "(cached) PASSED", a sharded
# target's "(5/6 cached) PASSED", a retried one's "FAILED in 3 out of 3 in 9.0s" and a
# flaky one's "FLAKY, failed in 1 out of 2 in 9.0s"; then "Stats over N runs: max = ...".
_CACHED = r"\((?:\d+/\d+ )?cached\) "
_RESULT = re.compile(rf"^(//\S+) +(?:{_CACHED})?"
                     r"(PASSED|FAILED|TIMEOUT|FLAKY|NO STATUS|INCOMPLETE)\b", re.M)
_TIME = re.compile(rf"^(//\S+) +(?:{_CACHED})?"
                   r"[A-Z ]+?(?:,? (?:failed )?in \d+ out of \d+)? in ([\d.]+)s\n"
                   r"(?: +Stats over \d+ runs: max = ([\d.]+)s)?", re.M)
_FLAKY = re.compile(rf"^(//\S+) +({_CACHED})?FLAKY, failed in (\d+) out of (\d+)\b",
                    re.M)
IGNORED = {"test_session"}  # tf.test.TestCase's own, skipped by design
TIMEOUTS = {"small": 60, "medium": 300, "large": 900, "enormous": 3600}  # Bazel's, in s


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


def slow_targets(log, sizes_path):
  """(label, seconds, size) of each target over a third of its size's timeout."""
  with open(sizes_path) as f:
    sizes = dict(fields for fields in map(str.split, f) if len(fields) == 2
                 and fields[1] in TIMEOUTS)  # anything else Bazel printed: not a size
  slow = []
  for label, last, most in _TIME.findall(log):
    seconds = float(most or last)
    if label in sizes and seconds > TIMEOUTS[sizes[label]] / 3:
      slow.append((label, seconds, sizes[label]))
  return sorted(slow)


def main(log_path, sizes_path=None):
  with open(log_path, errors="replace") as f:
    log = f.read()
  results = dict(_RESULT.findall(log))
  for label, cached, fails, runs in _FLAKY.findall(log):
    package, name = label[2:].split(":")
    print(f"flaky: {label}: failed {fails} of {runs} runs, then passed"
          f"{' (a cached result)' if cached else ''}; the failed runs' logs: "
          f"bazel-testlogs/{package}/{name}/test_attempts/")
  passed = failed = skipped = 0
  for label, status in sorted(results.items()):
    if status not in ("PASSED", "FLAKY"):
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
  for label, seconds, size in slow_targets(log, sizes_path) if sizes_path else ():
    print(f"slow: {label}: {seconds:.1f} s, over a third of "
          f"{'an' if size[0] in 'aeiou' else 'a'} {size} test's "
          f"{TIMEOUTS[size]} s timeout; make it quicker or size it up (docs/developing.md)")
  print(f"{passed} passed, {failed} failed, {skipped} skipped")
  return passed + skipped


if __name__ == "__main__":
  if sys.argv[1:] == ["--sizes"]:
    print(" ".join(TIMEOUTS))
    sys.exit(0)
  sys.exit(0 if main(*sys.argv[1:3]) else 3)
