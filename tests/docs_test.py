"""README.md and docs/*.md: every command runs as written, every page is reachable.

A dry check, nothing is run. Each `./bazelw` / `bazel` command of a code block names
targets that exist (a `name = ...` of the package's BUILD, or one a macro of ours
makes: the test executes the BUILD file with every rule as a recorder, and our own
.bzl macros, such as recipes/recipe.bzl, as written), passes each binary only flags its
main module defines (`flags.DEFINE_*`, absl's own, and for //launch the trainer's after
a second `--`), and Gin files that exist. Every `//label` named anywhere in the pages
exists. README.md stays short, links every page of docs/, and every long page opens
with a table of contents whose links reach its headings. Gin bindings are not checked.
"""

import glob
import os
import re
import shlex

from absl.testing import absltest

README = "README.md"
README_MAX_LINES = 300
LONG_PAGE = 80  # lines; a page longer than this needs a table of contents

# Bazel's own options the pages may use (before the target). `--config=X` must also
# be a config of .bazelrc.
BAZEL_OPTIONS = {"config", "test_tag_filters", "test_output", "test_filter"}
# absl's flags, defined by absl.app / absl.logging for every binary.
ABSL_FLAGS = {
    "help", "helpfull", "helpshort", "helpxml", "flagfile", "undefok", "only_check_args",
    "pdb", "pdb_post_mortem", "run_with_pdb", "run_with_profiling", "profile_file",
    "use_cprofile_for_profiling", "logtostderr", "alsologtostderr", "log_dir",
    "verbosity", "v", "stderrthreshold", "showprefixforinfo", "logger_levels",
}
# A launcher's arguments after its own literal `--` go to this module (launch/cli.py runs
# `python3 -m recipes.train` on every worker).
FORWARDS = {"launch/cli.py": "recipes/train.py"}
# .bzl files that declare rules, not macros: their functions are recorded as called.
# Every other .bzl a BUILD loads is executed, so its macros make their targets.
RULE_LAYER = ("third_party/",)
# What a page must not carry: the project's history instead of its current state.
HISTORY = ("earlier session", "last session", "this session", "before the rebuild")

_DEFINE = re.compile(r"""\bDEFINE_(\w+)\(\s*["'](\w+)["']""")
_LABEL = re.compile(r"(?<![\w:@/.-])//([\w/.-]*)(?::([\w.+-]+))?")
_LINK = re.compile(r"\]\(([^)\s]+)\)")


def root():
  srcdir = os.environ.get("TEST_SRCDIR")
  if srcdir:
    return os.path.join(srcdir, os.environ.get("TEST_WORKSPACE", "model_zoo"))
  return os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


ROOT = root()


def read(path):
  with open(os.path.join(ROOT, path), encoding="utf-8") as f:
    return f.read()


def exists(path):
  return os.path.exists(os.path.join(ROOT, path))


def pages():
  """README.md and every docs/*.md, as {path: text}."""
  paths = [README] + sorted(
      os.path.relpath(p, ROOT) for p in glob.glob(os.path.join(ROOT, "docs", "*.md")))
  return {p: read(p) for p in paths}


# --- Markdown ---------------------------------------------------------------------

def code_blocks(text):
  """The lines of each code block (fenced, or indented four spaces after a blank line
  outside a list), in order."""
  blocks, block, fenced, indented, in_list, blank = [], [], False, False, False, True
  for line in text.splitlines():
    if line.lstrip().startswith("```"):
      if fenced or indented:
        blocks.append(block)
      block, indented, fenced = [], False, not fenced
      continue
    if fenced:
      block.append(line)
      continue
    if indented and (line.startswith("    ") or not line.strip()):
      block.append(line[4:])
      continue
    if indented:
      blocks.append(block)
      block, indented = [], False
    if line.startswith("    ") and blank and not in_list:
      block, indented = [line[4:]], True
      continue
    if re.match(r" {0,3}([-*+]|\d+\.) ", line):
      in_list = True
    elif line.strip() and not line.startswith(" "):
      in_list = False
    blank = not line.strip()
  if block:
    blocks.append(block)
  return blocks


def commands(text):
  """Each `./bazelw` or `bazel` command of the code blocks, as shell words."""
  out = []
  for block in code_blocks(text):
    joined = "\n".join(block).replace("\\\n", " ")
    for line in joined.splitlines():
      for part in re.split(r"\s&&\s|\s;\s", line):  # cd x && ./bazelw ...
        part = part.strip()
        if re.match(r"(\./bazelw|bazel)\s", part):
          out.append((part, shlex.split(part, comments=True)))
  return out


def slug(heading):
  """GitHub's anchor of a heading."""
  text = re.sub(r"[`*]", "", heading.strip().lower())
  text = re.sub(r"[^\w\- ]", "", text)
  return text.replace(" ", "-")


def headings(text):
  out, fenced = [], False
  for line in text.splitlines():
    if line.lstrip().startswith("```"):
      fenced = not fenced
    m = re.match(r"(#{1,6}) (.*)", line)
    if m and not fenced:
      out.append((len(m.group(1)), m.group(2)))
  return out


# --- BUILD files ------------------------------------------------------------------

class Rule:
  """Stands in for every rule and function a BUILD file calls: records targets."""

  def __init__(self, package, kind):
    self.package, self.kind = package, kind  # the package path, the function's name

  def __call__(self, *args, **kwargs):
    if self.kind in ("glob", "select"):  # what a list attribute may be built from
      return []
    if "name" in kwargs:
      Package.current.targets[kwargs["name"]] = (self.kind, kwargs)
    return self.kind

  def __getattr__(self, attr):  # native.py_binary, ...
    return Rule(self.package, attr)


class Package:
  """The targets of one package, by executing its BUILD file as Python."""
  current = None
  cache = {}

  def __init__(self, path):
    self.path = path  # "recipes/reproduce"; "" for the root
    self.targets = {}

  @classmethod
  def get(cls, path):
    if path not in cls.cache:
      cls.cache[path] = cls(path).load()
    return cls.cache[path]

  def load(self):
    build = os.path.join(self.path, "BUILD")
    if not exists(build):
      raise AssertionError(
          f"//{self.path}: {build} is not in //tests:docs_test's data (add "
          f"\"//{self.path}:BUILD\" to tests/BUILD), or the package does not exist")
    self.run(read(build), build, {})
    return self

  def run(self, source, filename, env):
    """Executes `source`; a name it uses but never defines becomes a `Rule`."""
    env = dict(env)
    env.setdefault("load", self.load_bzl(env))
    for _ in range(100):
      Package.current, saved = self, Package.current
      try:
        exec(compile(source, filename, "exec"), env)  # pylint: disable=exec-used
        return env
      except NameError as e:
        name = getattr(e, "name", None) or re.search(r"'(\w+)'", str(e)).group(1)
        env[name] = Rule(self.path, name)
      finally:
        Package.current = saved
    raise AssertionError(f"{filename}: too many unknown names")

  def load_bzl(self, env):
    def load(label, *symbols, **aliases):
      path = label.lstrip("/").replace(":", "/")
      if not path.startswith(RULE_LAYER):  # one of our macros (in the test's data)
        bzl = self.run(read(path), path, {})
        for s in symbols:
          env[s] = bzl[s]
      else:  # rules (defs.bzl's zoo_py_* wrap native rules, name and main as given)
        for s in list(symbols) + list(aliases):
          env[s] = Rule(self.path, s)
    return load

  def main_module(self, name):
    """The workspace path of binary `name`'s main module."""
    _, attrs = self.targets[name]
    main = attrs.get("main") or (attrs.get("srcs") or [name + ".py"])[0]
    if main.startswith("//"):
      return main.lstrip("/").replace(":", "/")
    return os.path.join(self.path, main.lstrip(":"))


def split_label(label):
  """'//a/b:c' -> ('a/b', 'c'); '//a/b' -> ('a/b', 'b')."""
  m = _LABEL.fullmatch(label.rstrip("."))
  if not m:
    raise ValueError(label)
  path, name = m.group(1).rstrip("/"), m.group(2)
  return path, name or os.path.basename(path)


_IMPORT = re.compile(r"^from ([\w.]+) import (\w+)(?: as (\w+))?$", re.M)
_ADOPT = re.compile(r"\badopt_module_key_flags\((\w+)\)")


def defined_flags(module):
  """The flags `module` defines, with those of the modules whose key flags it adopts
  (`flags.adopt_module_key_flags(runs_lib)`: benchmarks/runs.py's shared flags)."""
  text = read(module)
  found = {m.group(2) for m in _DEFINE.finditer(text)} | ABSL_FLAGS
  imported = {m.group(3) or m.group(2): f"{m.group(1).replace('.', '/')}/{m.group(2)}.py"
              for m in _IMPORT.finditer(text)}
  for m in _ADOPT.finditer(text):
    found |= defined_flags(imported[m.group(1)])
  return found


# --- The checks -------------------------------------------------------------------

class DocsTest(absltest.TestCase):

  @classmethod
  def setUpClass(cls):
    super().setUpClass()
    cls.pages = pages()
    rc = read(".bazelrc")
    cls.configs = set(re.findall(r"^\w+:(\w+)\s", rc, re.M))

  def check_label(self, label, where):
    if label.endswith("/...") or label == "//...":
      path = label[2:-4].rstrip("/")
      self.assertTrue(path == "" or exists(os.path.join(path, "BUILD")),
                      f"{where}: {label}: no package {path}")
      return None
    path, name = split_label(label)
    package = Package.get(path)
    self.assertTrue(name in package.targets,
                    f"{where}: {label}: //{path} has no target {name!r} (it has "
                    f"{', '.join(sorted(package.targets))})")
    return package

  def check_binary_args(self, module, args, where):
    """`args` are what follows the target's `--`."""
    if not args:
      return
    known = defined_flags(module)
    for i, arg in enumerate(args):
      if arg == "--":
        forward = FORWARDS.get(module)
        self.assertIsNotNone(forward, f"{where}: a second `--` for {module}")
        self.check_binary_args(forward, args[i + 1:], where)
        return
      if not arg.startswith("--"):
        continue  # a flag's value, a placeholder (...)
      flag, _, value = arg[2:].partition("=")
      self.assertTrue(
          flag in known or (flag.startswith("no") and flag[2:] in known),
          f"{where}: --{flag} is not a flag of {module} ({', '.join(sorted(known))})")
      if flag == "gin_file":
        self.assertTrue(exists(value), f"{where}: --gin_file={value}: no such file")
      if flag == "recipe":
        self.assertTrue(exists(f"recipes/{value}.gin"),
                        f"{where}: --recipe={value}: no recipes/{value}.gin")

  def check_command(self, line, words, where):
    where = f"{where}: `{line}`"
    verb, rest = words[1], words[2:]
    if "--" in rest:
      rest, args = rest[:rest.index("--")], rest[rest.index("--") + 1:]
    else:
      args = []
    targets = []
    for word in rest:
      if word.startswith("--"):
        option, _, value = word[2:].partition("=")
        self.assertIn(option, BAZEL_OPTIONS,
                      f"{where}: bazel option --{option} is not one the pages may use "
                      "(tests/docs_test.py BAZEL_OPTIONS)")
        if option == "config":
          self.assertIn(value, self.configs, f"{where}: --config={value} is not in .bazelrc")
      elif word.startswith("//"):
        targets.append(word)
      elif verb in ("run", "test", "build"):
        self.assertEqual("...", word, f"{where}: {word!r} is not a target")
    if verb in ("run", "test", "build"):
      self.assertTrue(targets, f"{where}: no target")
    for target in targets:
      if "<" in target:  # //recipes:<recipe>: any binary of the package
        package = Package.get(target[2:target.index(":")])
        mains = {package.main_module(n) for n, (_, a) in package.targets.items()
                 if "main" in a}
        if verb == "run" and len(mains) == 1:
          self.check_binary_args(mains.pop(), args, where)
        continue
      package = self.check_label(target, where)
      if verb == "run":
        _, name = split_label(target)
        self.check_binary_args(package.main_module(name), args, where)
    self.assertFalse(args and verb != "run", f"{where}: arguments after -- need `run`")

  def test_commands_run_as_written(self):
    count = 0
    for path, text in self.pages.items():
      for line, words in commands(text):
        with self.subTest(page=path, command=line):
          self.check_command(line, words, path)
        count += 1
    self.assertGreater(count, 20)  # the extraction itself works

  def test_labels_exist(self):
    for path, text in self.pages.items():
      for m in _LABEL.finditer(text):
        if text[m.end():m.end() + 1] in ("<", ":"):  # //recipes:<name>: a placeholder
          continue
        with self.subTest(page=path, label=m.group(0)):
          self.check_label(m.group(0), path)

  def test_gin_files_named_exist(self):
    for path, text in self.pages.items():
      for gin_file in re.findall(r"--gin_file=([\w/.-]+\.gin)", text):
        self.assertTrue(exists(gin_file), f"{path}: --gin_file={gin_file}: no such file")

  def test_readme_is_short_and_links_every_page(self):
    lines = self.pages[README].count("\n")
    self.assertLessEqual(lines, README_MAX_LINES)
    linked = {link.split("#")[0] for link in _LINK.findall(self.pages[README])}
    for path in self.pages:
      if path != README:
        self.assertTrue(path in linked, f"README.md does not link {path}")

  def test_links_reach_pages_and_headings(self):
    anchors = {p: {slug(h) for _, h in headings(t)} for p, t in self.pages.items()}
    for path, text in self.pages.items():
      for link in _LINK.findall(text):
        if re.match(r"\w+://|mailto:", link):
          continue
        target, _, anchor = link.partition("#")
        target = os.path.normpath(os.path.join(os.path.dirname(path), target)) if target else path
        with self.subTest(page=path, link=link):
          self.assertFalse(target.startswith(".."), f"{path}: {link} leaves the repository")
          if target.endswith(".md"):
            self.assertTrue(target in self.pages, f"{path}: {link}: no such page")
            if anchor:
              self.assertTrue(anchor in anchors[target], f"{path}: {link}: no such heading")
          elif target.startswith("docs/images/"):  # the pages' pictures are test data
            self.assertTrue(exists(target), f"{path}: {link}: no such file")

  def test_long_pages_open_with_a_table_of_contents(self):
    for path, text in self.pages.items():
      if text.count("\n") <= LONG_PAGE:
        continue
      sections = [slug(h) for level, h in headings(text) if level == 2]
      first = text.find("\n## ")
      toc = set(re.findall(r"\]\(#([\w-]+)\)", text[:first if first >= 0 else len(text)]))
      self.assertTrue(toc, f"{path}: over {LONG_PAGE} lines and no table of contents")
      for section in sections:
        self.assertIn(section, toc, f"{path}: the table of contents lacks #{section}")

  def test_pages_state_the_present(self):
    for path, text in self.pages.items():
      for phrase in HISTORY:
        self.assertFalse(phrase in text.lower(), f"{path}: {phrase!r}: state what is true now")

  def test_the_extraction(self):
    text = ("Run it:\n\n    ./bazelw run //recipes:a -- \\\n        --model_dir=x  # c\n"
            "\n```\ncd x && bazel test //tests:b\n```\n- a list\n    continued\n")
    self.assertEqual([["./bazelw", "run", "//recipes:a", "--", "--model_dir=x"],
                      ["bazel", "test", "//tests:b"]], [w for _, w in commands(text)])
    self.assertEqual("tests-and-the-tree-map", slug("Tests, and the `tree` map"))
    self.assertEqual(("recipes", "recipes"), split_label("//recipes"))
    self.assertEqual(("launch", "launch"), split_label("//launch"))


if __name__ == "__main__":
  absltest.main()
