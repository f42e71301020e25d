"""A student's file runs as an imported module: its `if __name__ == "__main__":` blocks never run, whatever it does.

The module a child executes is named "submission", so such a block is skipped anyway, unless the file first makes
`__name__` equal "__main__" by a route no scan sees (enum.global_enum writes a class's members into its module's
globals, found by a reviewing helper). A student's own test code lives there, so the parent's scan neither flags
nor refuses what it holds; the child compiles each such block's test as `False`, which makes that sound.
Torch-free: the parent's scan reads the same pattern.
"""

from __future__ import annotations

import ast

_NAME, _MAIN = ast.dump(ast.Name("__name__", ast.Load())), ast.dump(ast.Constant("__main__"))


def main_blocks(tree: ast.Module) -> list[ast.If]:
    """Return the file's top-level `if __name__ == "__main__":` statements (either order, no else)."""
    found = []
    for node in tree.body:
        test = node.test if isinstance(node, ast.If) else None
        if (
            isinstance(test, ast.Compare)
            and len(test.ops) == 1
            and isinstance(test.ops[0], ast.Eq)
            and {ast.dump(test.left), ast.dump(test.comparators[0])} == {_NAME, _MAIN}
            and not node.orelse
        ):
            found.append(node)
    return found


def compile_module(text: str, path: str):
    """Compile a student's file with each `if __name__ == "__main__":` test made `False` (lines kept)."""
    if "__main__" in text:  # most files: compiled as they are
        try:
            tree = ast.parse(text, path)
        except (SyntaxError, ValueError, RecursionError, MemoryError):
            tree = None  # compiling the text says what is wrong, as it always did
        blocks = main_blocks(tree) if tree is not None else []
        if blocks:
            for block in blocks:
                block.test = ast.copy_location(ast.Constant(False), block.test)
            return compile(tree, path, "exec", dont_inherit=True)
    return compile(text, path, "exec", dont_inherit=True)  # not the caller's __future__ flags
