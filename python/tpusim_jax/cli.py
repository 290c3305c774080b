"""`python -m tpusim_jax export MODULE:FUNCTION --arg NAME=SHAPE:DTYPE ... -o program.json`."""
from __future__ import annotations

import argparse
import importlib
import importlib.util
import json
import os
import sys

import jax
import jax.numpy as jnp

from tpusim_jax.export import ExportError, check_data, export

DTYPES = {"bf16": jnp.bfloat16, "f32": jnp.float32, "int8": jnp.int8}


def load_function(spec: str):
    """MODULE:FUNCTION, MODULE a dotted module name or a path to a .py file."""
    module, sep, function = spec.partition(":")
    if not sep or not function:
        raise ExportError(f"'{spec}': expected MODULE:FUNCTION")
    if module.endswith(".py") or os.sep in module:
        path = os.path.abspath(module)
        loader_spec = importlib.util.spec_from_file_location(
            os.path.splitext(os.path.basename(path))[0], path)
        if loader_spec is None or not os.path.exists(path):
            raise ExportError(f"'{module}': no such Python file")
        mod = importlib.util.module_from_spec(loader_spec)
        sys.path.insert(0, os.path.dirname(path))
        loader_spec.loader.exec_module(mod)
    else:
        mod = importlib.import_module(module)
    if not hasattr(mod, function):
        raise ExportError(f"'{spec}': module {module} has no function {function}")
    return getattr(mod, function)


def parse_arg(text: str) -> tuple[str, jax.ShapeDtypeStruct]:
    """NAME=SHAPE:DTYPE with SHAPE as 1024x512 (or 1024,512)."""
    name, sep, rest = text.partition("=")
    shape, sep2, dtype = rest.rpartition(":")
    if not sep or not sep2 or not name:
        raise ExportError(f"--arg '{text}': expected NAME=SHAPE:DTYPE, e.g. x=1024x512:bf16")
    if dtype not in DTYPES:
        raise ExportError(f"--arg '{text}': unknown dtype '{dtype}' (known: bf16, f32, int8)")
    try:
        dims = tuple(int(d) for d in shape.replace(",", "x").split("x"))
    except ValueError:
        raise ExportError(f"--arg '{text}': shape '{shape}' is not like 1024x512") from None
    if any(d < 1 for d in dims):
        raise ExportError(f"--arg '{text}': dims must be positive")
    return name, jax.ShapeDtypeStruct(dims, DTYPES[dtype])


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="python -m tpusim_jax",
                                     description="export JAX functions to tpusim programs")
    sub = parser.add_subparsers(dest="command", required=True)
    ex = sub.add_parser("export", help="trace MODULE:FUNCTION and write its tpusim program")
    ex.add_argument("function", help="MODULE:FUNCTION (MODULE: a dotted name or a .py path)")
    ex.add_argument("--arg", action="append", default=[], metavar="NAME=SHAPE:DTYPE",
                    help="one positional argument of the function, in order")
    ex.add_argument("-o", "--output", required=True, help="the program JSON to write")
    ex.add_argument("--name", help="the program's name (default: FUNCTION)")
    ex.add_argument("--inputs", metavar="MODULE:FUNCTION",
                    help="make the --check inputs with FUNCTION(key, shapes) instead of normal "
                         "random values (for kernels with a precondition)")
    ex.add_argument("--check", metavar="FILE",
                    help="also write random inputs and JAX's outputs on them (Pallas interpreted "
                         "on the CPU) to FILE, for `tpusim kernel import PROGRAM --check FILE`")
    args = parser.parse_args(argv)
    try:
        fn = load_function(args.function)
        fn_args = [parse_arg(a) for a in args.arg]
        program = export(fn, fn_args, args.name or args.function.partition(":")[2])
        program["source"] = args.function
        files = {args.output: json.dumps(program, indent=1) + "\n"}
        if args.check:
            make = load_function(args.inputs) if args.inputs else None
            data = check_data(fn, fn_args, program, make_inputs=make)
            files[args.check] = json.dumps(data, separators=(",", ":")) + "\n"
    except ExportError as e:
        print(f"tpusim_jax: error: {e}", file=sys.stderr)
        return 2
    # Nothing is written unless everything succeeded; then each file appears whole.
    for path, text in files.items():
        with open(path + ".tmp", "w") as f:
            f.write(text)
    for path, text in files.items():
        os.replace(path + ".tmp", path)
        print(f"wrote {path} ({len(text)} bytes)", file=sys.stderr)
    return 0
