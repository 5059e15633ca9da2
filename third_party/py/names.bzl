"""PyPI package names as Bazel target names, shared by python_env.bzl and defs.bzl.

The convention (PEP 503 normalisation, with `_` as the separator): lower case, and
every run of `-`, `_` and `.` becomes one `_`. So `tf-keras`, `tf_keras` and
`TF.Keras` are all `@pypi//:tf_keras`; `Pillow` is `@pypi//:pillow`;
`scikit-learn` is `@pypi//:scikit_learn`. (rules_python's `requirement()` targets use
the same separator.)
"""

_SEPARATORS = "-_."

def normalized_name(name):
    """`name` (a distribution name, e.g. `absl-py`) as its target name, `absl_py`."""
    out = []
    last_sep = False
    for c in name.elems():
        if c in _SEPARATORS:
            if not last_sep:
                out.append("_")
            last_sep = True
        else:
            out.append(c.lower())
            last_sep = False
    return "".join(out)

def lock_names(text):
    """The distribution names of a pip lock file, in order, as written.

    Takes each requirement line (`name==version \\`), not its continuation lines
    (`--hash=...`, `# via ...`, which are indented), comments or pip options.
    """
    names = []
    for line in text.splitlines():
        if not line or line[0] in " \t#-":
            continue
        name = line
        for stop in ["=", "<", ">", "!", "~", ";", "[", "@", " ", "\\"]:
            name = name.split(stop)[0]
        name = name.strip()
        if name:
            names.append(name)
    return names
