"""Grade hand-derived backpropagation (makemore part 4) against autograd."""


def __getattr__(name: str):
    """Import `check` only when it is asked for, so `import grader` stays light."""
    if name == "check":
        from grader.cli.check import check

        globals()["check"] = check  # the function, not the submodule of the same name
        return check
    raise AttributeError(f"module 'grader' has no attribute {name!r}")
