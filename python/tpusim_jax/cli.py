"""`python -m tpusim_jax export MODULE:FUNCTION --arg NAME=SHAPE:DTYPE ... -o program.json` and
`python -m tpusim_jax compile MODULE:FUNCTION --topology v5e:2x2 --arg ... -o DIR` and
`python -m tpusim_jax compile-step KEY=VALUE ... -o FILE.json` (MaxText's command line) and
`python -m tpusim_jax profile MODULE:FUNCTION --arg ... -o TRACE.json.gz` (jax.profiler's trace)
and `python -m tpusim_jax xplane-to-trace PROFILE.xplane.pb -o TRACE.json.gz`."""
from __future__ import annotations

import argparse
import importlib
import importlib.util
import json
import os
import shutil
import sys
import tempfile

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
                                     description="export JAX functions to tpusim programs, or "
                                                 "compile them for a TPU topology")
    sub = parser.add_subparsers(dest="command", required=True)
    ex = sub.add_parser("export", help="trace MODULE:FUNCTION and write its tpusim program")
    function_args(ex)
    ex.add_argument("-o", "--output", required=True, help="the program JSON to write")
    ex.add_argument("--name", help="the program's name (default: FUNCTION)")
    ex.add_argument("--inputs", metavar="MODULE:FUNCTION",
                    help="make the --check inputs with FUNCTION(key, shapes) instead of normal "
                         "random values (for kernels with a precondition)")
    ex.add_argument("--check", metavar="FILE",
                    help="also write random inputs and JAX's outputs on them (Pallas interpreted "
                         "on the CPU) to FILE, for `tpusim kernel import PROGRAM --check FILE`")
    co = sub.add_parser("compile", help="compile MODULE:FUNCTION for one chip of a TPU topology "
                                        "with libtpu and write what the compiler decided")
    function_args(co)
    co.add_argument("--topology", required=True, metavar="NAME",
                    help="a TPU topology as JAX names them: v5e:2x2, v6e:2x2, v5p:2x2x1")
    co.add_argument("-o", "--output", required=True, metavar="DIR",
                    help="the directory to write (optimized.hlo, compile.json, kernels.json, "
                         "mosaic/); replaced whole when the compile succeeds")
    st = sub.add_parser("compile-step", help="compile a dense decoder's training step as MaxText "
                                             "runs it (its command line's key=value) for its "
                                             "compile_topology and write the compiler's memory "
                                             "analysis or out-of-memory verdict")
    st.add_argument("overrides", nargs="+", metavar="KEY=VALUE",
                    help="MaxText keys (`tpusim export maxtext SCENARIO` prints a scenario's)")
    st.add_argument("-o", "--output", required=True, metavar="FILE.json")
    st.add_argument("--hlo", metavar="FILE", help="also write the optimized HLO there")
    for sp in (co, st):
        sp.add_argument("--vliw-floors", action="store_true",
                        help="record each op's VLIW schedule length from libtpu's final bundles "
                             "(`tpusim run --hlo --vliw-floors` takes it as the op's least time)")
    pr = sub.add_parser("profile", help="run MODULE:FUNCTION under jax.profiler on this "
                                         "machine's device and keep its Perfetto trace")
    function_args(pr)
    pr.add_argument("--steps", type=int, default=3, help="profiled calls, one step each")
    pr.add_argument("-o", "--output", required=True, metavar="TRACE.json.gz")
    pr.add_argument("--xplane", metavar="FILE.xplane.pb",
                    help="also keep XProf's own profile of the same run")
    xp = sub.add_parser("xplane-to-trace", help="rewrite XProf's .xplane.pb as the Chrome "
                                                 "trace JSON `tpusim import profile` reads")
    xp.add_argument("xplane", metavar="PROFILE.xplane.pb")
    xp.add_argument("-o", "--output", required=True, metavar="TRACE.json.gz")
    args = parser.parse_args(argv)
    if args.command == "xplane-to-trace":
        from tpusim_jax.xplane import write_trace
        try:
            print(f"wrote {write_trace(args.xplane, args.output)}", file=sys.stderr)
        except ExportError as e:
            print(f"tpusim_jax: error: {e}", file=sys.stderr)
            return 2
        return 0
    if args.command == "compile-step":
        return compile_step_to(args)
    try:
        fn = load_function(args.function)
        fn_args = [parse_arg(a) for a in args.arg]
        if args.command == "compile":
            return compile_to(fn, fn_args, args)
        if args.command == "profile":
            from tpusim_jax.profile_capture import capture
            print(f"wrote {capture(fn, fn_args, args.steps, args.output, args.xplane)}",
                  file=sys.stderr)
            return 0
        files = export_files(fn, fn_args, args)
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


def function_args(parser) -> None:
    parser.add_argument("function", help="MODULE:FUNCTION (MODULE: a dotted name or a .py path)")
    parser.add_argument("--arg", action="append", default=[], metavar="NAME=SHAPE:DTYPE",
                        help="one positional argument of the function, in order")


def export_files(fn, fn_args, args) -> dict[str, str]:
    program = export(fn, fn_args, args.name or args.function.partition(":")[2])
    program["source"] = args.function
    files = {args.output: json.dumps(program, indent=1) + "\n"}
    if args.check and program.get("functional") is False:
        raise ExportError("--check: the functional check runs programs of Pallas kernels only; "
                          "this one has XLA work outside its kernels (tpusim times it but does "
                          "not execute it)")
    if args.check:
        make = load_function(args.inputs) if args.inputs else None
        data = check_data(fn, fn_args, program, make_inputs=make)
        files[args.check] = json.dumps(data, separators=(",", ":")) + "\n"
    return files


def compile_to(fn, fn_args, args) -> int:
    """Compiles into a scratch directory beside DIR, then puts it in DIR's place."""
    from tpusim_jax.compile import compile_for_topology
    out = os.path.abspath(args.output)
    scratch = tempfile.mkdtemp(prefix=os.path.basename(out) + ".", dir=os.path.dirname(out))
    try:
        result = compile_for_topology(fn, fn_args, args.topology, scratch, args.function,
                                      args.vliw_floors)
    except BaseException:
        shutil.rmtree(scratch, ignore_errors=True)
        raise
    shutil.rmtree(out, ignore_errors=True)
    os.replace(scratch, out)
    mem = result["memory"]
    print(f"compiled {args.function} for {args.topology} ({result['device_kind']}): "
          f"HBM {mem['total_bytes'] / 2**20:.1f} MiB (arguments {mem['argument_bytes'] / 2**20:.1f}, "
          f"outputs {mem['output_bytes'] / 2**20:.1f}, temporaries {mem['temp_bytes'] / 2**20:.1f}), "
          f"{len(result['pallas_kernels'])} Pallas kernels", file=sys.stderr)
    print(f"wrote {out}/ ({', '.join(sorted(os.listdir(out)))})", file=sys.stderr)
    return 0


def compile_step_to(args) -> int:
    from tpusim_jax.compile_step import compile_train_step
    try:
        result = compile_train_step(args.overrides, args.hlo, args.vliw_floors)
    except ExportError as e:
        print(f"tpusim_jax: error: {e}", file=sys.stderr)
        return 2
    with open(args.output + ".tmp", "w") as f:
        json.dump(result, f, indent=1)
        f.write("\n")
    os.replace(args.output + ".tmp", args.output)
    verdict = (f"HBM {result['memory']['total_bytes'] / 2**30:.2f} GiB per chip" if result["fits"]
               else f"does not fit: {result['message']}")
    print(f"compiled the step for {result['topology']} ({result['device_kind']}): {verdict}",
          file=sys.stderr)
    print(f"wrote {args.output}", file=sys.stderr)
    return 0
