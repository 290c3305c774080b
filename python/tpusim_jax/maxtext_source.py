"""Functions of MaxText, taken from its pinned wheel at run time (python/maxtext-source.sha256).

MaxText 0.2.5 needs Python >= 3.12 and cannot be installed here (Python 3.11), so
scripts/setup.sh downloads the wheel, checks its hash, and leaves it in .venv/wheels. This module
reads one top-level function's source from the wheel (or every function of a small module, with its
constants), compiles it under the wheel's file name (so traced ops name
maxtext/models/qwen3.py:LINE) and runs its definition with the globals it is given.
Nothing of MaxText is copied into this repository.
"""
from __future__ import annotations

import ast
import os
import types
import zipfile

_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
_PIN = os.path.join(_ROOT, "python", "maxtext-source.sha256")


class MaxTextSourceError(Exception):
    """The wheel or the function is missing: the message says what to run."""


def wheel_path() -> str:
    with open(_PIN) as f:
        name = f.read().split()[1]
    path = os.path.join(_ROOT, ".venv", "wheels", name)
    if not os.path.exists(path):
        raise MaxTextSourceError(f"{path} is missing: run scripts/setup.sh")
    return path


def _tree(module_file: str) -> ast.Module:
    with zipfile.ZipFile(wheel_path()) as z:
        try:
            source = z.read(module_file).decode()
        except KeyError:
            raise MaxTextSourceError(f"{module_file} is not in {wheel_path()}") from None
    return ast.parse(source, filename=module_file)


def module(module_file: str, globals_: dict) -> types.SimpleNamespace:
    """Every top-level function and constant assignment of `module_file`, defined together in a
    namespace holding `globals_` (its imports), as attributes."""
    body = [n for n in _tree(module_file).body if isinstance(n, (ast.FunctionDef, ast.Assign))]
    namespace = dict(globals_)
    exec(compile(ast.Module(body=body, type_ignores=[]), module_file, "exec"), namespace)  # noqa: S102
    return types.SimpleNamespace(**{k: v for k, v in namespace.items()
                                    if k not in globals_ and not k.startswith("__")})


def function(module_file: str, name: str, globals_: dict):
    """The top-level function `name` of `module_file` (e.g. maxtext/models/qwen3.py) in the
    wheel, defined in a namespace holding `globals_` (the names its body uses)."""
    for node in _tree(module_file).body:
        if isinstance(node, ast.FunctionDef) and node.name == name:
            namespace = dict(globals_)
            exec(compile(ast.Module(body=[node], type_ignores=[]), module_file, "exec"),  # noqa: S102
                 namespace)
            return namespace[name]
    raise MaxTextSourceError(f"{module_file} in {wheel_path()} has no function {name}")
