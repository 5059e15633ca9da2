"""The project's Python build macros: every BUILD file loads its rules from here.

They wrap Bazel 4's native Python rules, so that a move to rules_python and bzlmod
changes this file alone. `requirement(name)` names a PyPI package of the lock file
(`@pypi//:<normalised name>`, one py_library a package, made by python_env.bzl).
"""

load("//third_party/py:names.bzl", "normalized_name")

_PYPI = "@pypi//:"

# The lock's digest (`@pypi//:stamp.txt`): every target depends on it, so a lock change
# invalidates every cached test, whatever packages a target names.
_PKGS = _PYPI + "pkgs"

# bazel#7091: keep the source tree off sys.path so imports come from the runfiles.
_ENV = {"PYTHONSAFEPATH": "1"}

def requirement(name):
    """The target for PyPI distribution `name` of the lock file.

    `name` is the distribution's name as on PyPI (`tf-keras`, `gin-config`,
    `scikit-learn`, `Pillow`), not its import name; it becomes `@pypi//:<normalised>`
    (third_party/py/names.bzl: lower case, runs of `-_.` become `_`, so
    `@pypi//:tf_keras`). A name missing from requirements_lock.txt fails at analysis
    with "no such target '@pypi//:<name>'".
    """
    if not name:
        fail("requirement() needs a package name")
    for c in ["=", "<", ">", "!", "~", ";", "[", "@", " ", ":", "/"]:
        if c in name:
            fail("requirement({}): give the bare distribution name (versions and extras live in third_party/py/requirements.in)".format(repr(name)))
    return _PYPI + normalized_name(name)

def _with_pkgs(deps):
    # Each dependency once (requirement() of `tf-keras` and `tf_keras` is one target),
    # then the lock's stamp.
    out = []
    for d in (deps or []):
        if d != _PKGS and d not in out:
            out.append(d)
    return out + [_PKGS]

def zoo_py_library(name, srcs = None, deps = None, **kwargs):
    """One module's library: `srcs` defaults to `<name>.py` and the package's __init__.py."""
    native.py_library(
        name = name,
        srcs = (srcs or [name + ".py"]) + native.glob(["__init__.py"]),
        deps = _with_pkgs(deps),
        srcs_version = "PY3",
        **kwargs
    )

def zoo_py_binary(name, srcs = None, main = None, deps = None, env = None, **kwargs):
    """A runnable target (`bazel run`)."""
    native.py_binary(
        name = name,
        srcs = srcs or [name + ".py"],
        main = main,
        deps = _with_pkgs(deps),
        python_version = "PY3",
        srcs_version = "PY3",
        env = dict(_ENV, **(env or {})),
        **kwargs
    )

# Test tiers: `--test_tag_filters=-e2e` is the quick presubmit; `bazel test //...` runs
# both. Each tier's allowed sizes, the first its default.
_TIER_SIZES = {
    "unit": ["small", "medium"],
    "e2e": ["large", "medium", "enormous"],
}

def zoo_py_test(name, tier = "unit", size = None, srcs = None, deps = None, env = None, tags = None, **kwargs):
    """One test file's target.

    Args:
      tier: "unit" (the default) or "e2e"; added to `tags`, so that
        `bazel test //... --test_tag_filters=-e2e` runs the unit tests alone.
      size: unit tests "small" (default) or "medium"; e2e tests "large" (default),
        "medium" or "enormous". Size a test so it takes at most a third of the
        size's timeout when run alone.
    """
    if tier not in _TIER_SIZES:
        fail("zoo_py_test({}): tier = {} is not one of {}".format(name, repr(tier), ", ".join([repr(t) for t in _TIER_SIZES])))
    allowed = _TIER_SIZES[tier]
    if size == None:
        size = allowed[0]
    elif size not in allowed:
        fail("zoo_py_test({}): size = {} is not allowed for tier = {} (allowed: {}); {}".format(
            name,
            repr(size),
            repr(tier),
            ", ".join([repr(s) for s in allowed]),
            "a test that long is tier = \"e2e\"" if tier == "unit" else "a test that quick is tier = \"unit\"",
        ))
    tags = list(tags or [])
    for other in _TIER_SIZES:
        if other in tags and other != tier:
            fail("zoo_py_test({}): tag {} contradicts tier = {}; set the tier with `tier`".format(name, repr(other), repr(tier)))
    if tier not in tags:
        tags.append(tier)
    native.py_test(
        name = name,
        size = size,
        srcs = srcs or [name + ".py"],
        deps = _with_pkgs(deps),
        python_version = "PY3",
        srcs_version = "PY3",
        env = dict(_ENV, **(env or {})),
        tags = tags,
        **kwargs
    )
