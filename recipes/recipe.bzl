"""`recipe`: a runnable recipe is the one trainer plus its Gin files."""

load("//third_party/py:defs.bzl", "requirement", "zoo_py_binary")

def recipe(name, gin_files, **kwargs):
    """`bazel run //recipes:<name>` trains with `gin_files` (paths in the workspace).

    Arguments after `--` follow: more --gin_file / --gin_bindings, --model_dir, ...
    """
    zoo_py_binary(
        name = name,
        srcs = ["//recipes:train.py"],
        main = "//recipes:train.py",
        args = ["--gin_file=" + f for f in gin_files],
        data = ["//recipes:gin_files"] + kwargs.pop("data", []),
        deps = [
            "//recipes:train_lib",
            requirement("absl-py"),  # train.py is this binary's own source too
            requirement("gin-config"),
        ],
        **kwargs
    )
