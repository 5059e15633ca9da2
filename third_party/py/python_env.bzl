"""A Python environment built from the hash-locked lock file, as a Bazel toolchain.

`python_env` is a repository rule: on first build it makes a virtual environment
inside its own external repository with the `python3` on PATH, installs the lock file
there with `pip install --require-hashes --no-deps` (PyPI is the only thing fetched),
and registers that environment's interpreter as the Python toolchain. The rule reads
the lock file, so editing the lock re-runs it; `:stamp.txt` holds the lock's digest and
every target depends on it through `:pkgs`, so no cached test survives a dependency
change. Rules_python would replace this file and `defs.bzl` alone.

Which lock: `locks` maps names to lock labels, and the environment variable
ZOO_PYTHON_LOCK names one (`cpu` when unset; `--config=gpu` sets `gpu` through
`--repo_env`). Changing it rebuilds the environment. Only the chosen lock is read, so
editing another lock leaves this environment alone (a label attribute would not:
Bazel re-runs a repository rule when any file its label attributes name changes).

Each package of the lock file is also a `py_library` named by its normalised name
(`names.bzl`: lower case, runs of `-_.` become `_`), e.g. `@pypi//:tf_keras`, which
`requirement("tf-keras")` returns; it depends on `:pkgs`. A BUILD file that names a
package missing from the lock fails at analysis ("no such target").
"""

load("//third_party/py:names.bzl", "lock_names", "normalized_name")

_BUILD = """\
load("@bazel_tools//tools/python:toolchain.bzl", "py_runtime_pair")

package(default_visibility = ["//visibility:public"])

py_runtime(
    name = "py3_runtime",
    interpreter_path = "{interpreter}",
    python_version = "PY3",
    stub_shebang = "#!/usr/bin/env python3",
)

py_runtime_pair(
    name = "runtime_pair",
    py3_runtime = ":py3_runtime",
)

toolchain(
    name = "toolchain",
    toolchain = ":runtime_pair",
    toolchain_type = "@bazel_tools//tools/python:toolchain_type",
)

# All packages of the lock file: the environment itself is the toolchain's, so this
# only carries the lock's digest into every target that depends on a package.
py_library(
    name = "pkgs",
    data = ["stamp.txt"],
)

# One target a package of the lock file, named by its normalised name
# (//third_party/py:names.bzl): what requirement() returns.
"""

_PACKAGE = """
# {line}
py_library(
    name = "{name}",
    deps = [":pkgs"],
)
"""

# Targets of _BUILD that no package may be named.
_RESERVED = ["pkgs", "py3_runtime", "runtime_pair", "toolchain"]

def _package_targets(lock_text):
    targets = []
    seen = {}
    for spec in lock_names(lock_text):
        name = normalized_name(spec)
        if name in _RESERVED:
            fail("python_env: the lock's package `{}` would shadow the target :{}".format(spec, name))
        if name in seen:
            fail("python_env: the lock names `{}` twice (as `{}` and `{}`)".format(name, seen[name], spec))
        seen[name] = spec
        targets.append(_PACKAGE.format(line = spec, name = name))
    if not targets:
        fail("python_env: found no `name==version` lines in the lock file")
    return "".join(targets)

def _run(rctx, args, what, timeout = 600, quiet = True):
    result = rctx.execute(args, timeout = timeout, quiet = quiet)
    if result.return_code != 0:
        fail("python_env: {} failed (exit {}): {}\n{}".format(
            what,
            result.return_code,
            " ".join([str(a) for a in args]),
            result.stderr,
        ))
    return result

def _lock_label(rctx):
    name = rctx.os.environ.get("ZOO_PYTHON_LOCK", "") or "cpu"
    if name not in rctx.attr.locks:
        fail("python_env: ZOO_PYTHON_LOCK={} names no lock; set one of {} (--config=gpu sets gpu)".format(
            repr(name),
            ", ".join(sorted(rctx.attr.locks)),
        ))
    return Label(rctx.attr.locks[name])

def _python_env_impl(rctx):
    python = rctx.which(rctx.attr.python)
    if not python:
        fail("python_env: no `{}` on PATH; install Python 3.11 with venv (Debian: apt-get install python3 python3-venv).".format(rctx.attr.python))
    lock_label = _lock_label(rctx)
    lock = rctx.path(lock_label)
    packages = _package_targets(rctx.read(lock))  # before the long install: fail fast
    venv = rctx.path("venv")
    _run(rctx, [python, "-m", "venv", "--clear", venv], "creating the virtual environment")
    interpreter = rctx.path("venv/bin/python3")
    rctx.report_progress("pip install --require-hashes -r {}".format(lock_label.name))
    _run(
        rctx,
        [
            interpreter,
            "-m",
            "pip",
            "install",
            "--disable-pip-version-check",
            "--no-input",
            "--quiet",
            "--require-hashes",
            "--no-deps",
            "-r",
            lock,
        ],
        "installing the lock file",
        timeout = rctx.attr.timeout,
        quiet = False,
    )
    digest = _run(rctx, [interpreter, "-c", _DIGEST, lock], "hashing the lock file").stdout.strip()
    rctx.file("stamp.txt", digest + "\n")
    rctx.file("BUILD.bazel", _BUILD.format(interpreter = interpreter) + packages)

_DIGEST = "import hashlib, sys; print(hashlib.sha256(open(sys.argv[1], 'rb').read()).hexdigest())"

python_env = repository_rule(
    implementation = _python_env_impl,
    attrs = {
        # Strings, not labels: see the module docstring.
        "locks": attr.string_dict(mandatory = True, doc = "ZOO_PYTHON_LOCK's values (`cpu` the default) to lock labels."),
        "python": attr.string(default = "python3"),
        "timeout": attr.int(default = 3600),
    },
    environ = ["PATH", "PIP_INDEX_URL", "PIP_EXTRA_INDEX_URL", "PIP_CONFIG_FILE", "ZOO_PYTHON_LOCK"],
)
