"""Every marked table of README.md and docs/*.md equals what its committed JSON renders
(benchmarks/tables.py), so no figure of a page is typed by hand, and every JSON under
docs/data/ backs a table or a plot of some page. A mark may name a glob of JSON files
(a record a run); its renderer gets their list."""

import glob
import json
import os
import re

from absl.testing import absltest

from benchmarks import tables

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if os.environ.get("TEST_SRCDIR"):
  ROOT = os.path.join(os.environ["TEST_SRCDIR"], os.environ.get("TEST_WORKSPACE",
                                                                "model_zoo"))
_MARK = re.compile(r"^<!-- table: (\S+\.json) (\w+)(?: methods=(\S+))? -->$")


def pages():
  paths = ["README.md"] + sorted(os.path.relpath(p, ROOT) for p in
                                 glob.glob(os.path.join(ROOT, "docs", "*.md")))
  out = {}
  for path in paths:
    with open(os.path.join(ROOT, path), encoding="utf-8") as f:
      out[path] = f.read()
  return out


def load(path):
  """A mark's JSON; a glob (docs/data/reproduce/*.json: a record a run) gives the list of
  the files it matches, in name order."""
  if not glob.has_magic(path):
    with open(os.path.join(ROOT, path)) as f:
      return json.load(f)
  paths = sorted(glob.glob(os.path.join(ROOT, path)))
  if not paths:
    raise AssertionError(f"{path} matches no file")
  out = []
  for p in paths:
    with open(p) as f:
      out.append(json.load(f))
  return out


def marked_tables(text):
  """(json path, renderer, methods or None, the table's lines) of each mark."""
  lines, found = text.splitlines(), []
  for i, line in enumerate(lines):
    mark = _MARK.match(line)
    if line.startswith("<!-- table:") and not mark:
      raise AssertionError(f"malformed table mark: {line}")
    if mark:
      end = i + 1
      while end < len(lines) and lines[end].strip():
        end += 1
      methods = mark.group(3).split(",") if mark.group(3) else None
      found.append((mark.group(1), mark.group(2), methods, "\n".join(lines[i + 1:end])))
  return found


class DocsDataTest(absltest.TestCase):

  def test_marked_tables_equal_their_json(self):
    count = 0
    for page, text in pages().items():
      for path, renderer, methods, table in marked_tables(text):
        with self.subTest(page=page, data=path):
          self.assertIn(renderer, tables.RENDERERS, msg=f"{page}: unknown renderer")
          data = load(path)
          render = tables.RENDERERS[renderer]
          want = render(data, methods) if methods else render(data)
          self.assertEqual(table, want, msg=f"{page}'s table differs from {path}")
          count += 1
    self.assertGreater(count, 0)

  def test_every_json_backs_a_page(self):
    text = "\n".join(pages().values())
    for path in glob.glob(os.path.join(ROOT, "docs", "data", "*.json")):
      name = os.path.relpath(path, ROOT)
      self.assertIn(name.replace("docs/", ""), text.replace("docs/", ""),
                    msg=f"{name} is named by no page")

  def test_the_marks_are_read(self):
    text = ("x\n<!-- table: docs/data/a.json long_tail methods=ce,la -->\n| a |\n|---|\n\n"
            "<!-- table: docs/data/b.json validation_sweep -->\n| b |\n")
    self.assertEqual(marked_tables(text),
                     [("docs/data/a.json", "long_tail", ["ce", "la"], "| a |\n|---|"),
                      ("docs/data/b.json", "validation_sweep", None, "| b |")])
    with self.assertRaisesRegex(AssertionError, "malformed"):
      marked_tables("<!-- table: a.json -->\n")


if __name__ == "__main__":
  absltest.main()
