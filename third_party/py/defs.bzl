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

def zoo_py_test(name, size, srcs = None, deps = None, env = None, **kwargs):
    """One test file's target; `size` is required so that it is set honestly."""
    native.py_test(
        name = name,
        size = size,
        srcs = srcs or [name + ".py"],
        deps = _with_pkgs(deps),
        python_version = "PY3",
        srcs_version = "PY3",
        env = dict(_ENV, **(env or {})),
        **kwargs
    )
