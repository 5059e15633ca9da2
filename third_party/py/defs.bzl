"""The project's Python build macros: every BUILD file loads its rules from here.

They wrap Bazel 4's native Python rules, so that a move to rules_python and bzlmod
changes this file alone. `requirement(name)` names a PyPI package of the lock file.
"""

_PKGS = "@pypi//:pkgs"

# bazel#7091: keep the source tree off sys.path so imports come from the runfiles.
_ENV = {"PYTHONSAFEPATH": "1"}

def requirement(name):
    """The target for PyPI package `name` (all of them live in one environment)."""
    if not name:
        fail("requirement() needs a package name")
    return _PKGS

def _with_pkgs(deps):
    # Every requirement() is the same target: list it once.
    return [d for d in (deps or []) if d != _PKGS] + [_PKGS]

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
