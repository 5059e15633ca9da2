"""benchmarks/records.py: a sitting's record is a new file, never one written before,
even when two sittings take the same name at once; no temporary file is left."""

import json
import os
import threading

import tensorflow as tf

from benchmarks import records


class RecordsTest(tf.test.TestCase):

  def test_stem_names_benchmark_revision_and_date(self):
    self.assertEqual(records.stem("transfer", "3b99fbac9dc3ff00", "2026-12-02"),
                     "transfer_3b99fbac9dc3_2026-12-02")
    self.assertEqual(records.stem("x", "3b99fbac9dc3ff00" * 2 + "+changes", "d"),
                     "x_3b99fbac9dc3-changes_d")  # a dirty tree says so
    self.assertEqual(records.stem("x", None, "d"), "x_norev_d")
    self.assertEqual(records.stem("x", "a/../b\n", "d"), "x_norev_d")  # no path, no newline

  def test_a_record_is_never_overwritten(self):
    folder = self.create_tempdir().full_path
    paths = [records.write_new(folder, "r", {"n": n}) for n in range(3)]
    self.assertEqual([os.path.basename(p) for p in paths], ["r.json", "r_2.json", "r_3.json"])
    for n, path in enumerate(paths):
      with open(path) as f:
        self.assertEqual(json.load(f), {"n": n})
    self.assertCountEqual(os.listdir(folder), ["r.json", "r_2.json", "r_3.json"])

  def test_two_sittings_at_once_keep_both(self):
    folder = self.create_tempdir().full_path
    found = []
    threads = [threading.Thread(target=lambda n=n: found.append(
        records.write_new(folder, "r", {"n": n}))) for n in range(8)]
    for t in threads:
      t.start()
    for t in threads:
      t.join()
    self.assertLen(set(found), 8)
    values = set()
    for path in found:
      with open(path) as f:
        values.add(json.load(f)["n"])
    self.assertEqual(values, set(range(8)))
    self.assertLen(os.listdir(folder), 8)


if __name__ == "__main__":
  tf.test.main()
