"""Compiles the training step of a MaxText command line (train_step.py) for its compile_topology
on this host: the compiler's memory analysis and cost analysis, its buffer assignment's HBM side
(compile.hbm_buffers), or its out-of-memory verdict; optionally the optimized HLO and, for the
Pallas GDN builds, the kernels as tpusim programs."""
from __future__ import annotations

import gzip
import json
import os
import re
import shutil
import tempfile

from tpusim_jax.bundles import BundleDump, floors
from tpusim_jax.export import ExportError, collect_kernels
from tpusim_jax.gdn_kernel_rule import GDN_KERNELS
from tpusim_jax.step_overrides import config_int, parse_overrides, topology_for
from tpusim_jax.train_step import build_step

STEP_FORMAT = "tpusim-compiled-step"
# libtpu's out-of-memory verdict, e.g. "the total memory required for HLO temporaries (48.96G)
# exceeds available HBM (31.25G)", or for the pinned host memory that remat offloads into,
# "Allocation (size=186831077376) would exceed memory (size=137438953472) :: ... operand.host" (one
# buffer over it) and "Ran out of memory in memory space host. Used 140.00G of 128.00G host" (all).
_OOM = re.compile(r"Ran out of memory in memory space (?:hbm|host)[^\n]*|RESOURCE_EXHAUSTED: Ran "
                  r"out of memory on HBM[^\n]*|RESOURCE_EXHAUSTED: Allocation \(size=\d+\) would "
                  r"exceed memory \(size=\d+\)[^\n]*\.host[^\n]*", re.IGNORECASE)


def compile_train_step(overrides: list[str], hlo_path: str | None = None,
                       vliw_floors: bool = False) -> dict:
    """Compiles the step of MaxText's command line `overrides` for its compile_topology; returns
    the compiler's memory analysis, or its out-of-memory verdict (`fits` false, its message);
    with `vliw_floors` also each op's VLIW schedule length (bundles.py)."""
    import jax
    from tpusim_jax.compile import buffer_dump_flag, versions

    if versions()["libtpu"] == "not installed":
        raise ExportError("compile-step needs libtpu (scripts/setup.sh installs the pinned version)")
    config = parse_overrides(overrides)
    name = topology_for(config["compile_topology"])
    slices = config_int(config, "compile_topology_num_slices")
    if config["dcn_data_parallelism"] not in ("-1", str(slices)):
        raise ExportError(f"dcn_data_parallelism={config['dcn_data_parallelism']}: the compiled "
                          f"step puts data parallelism over all {slices} slices")
    if config["quantization"] == "int8":
        # MaxText's trainer draws random bits with XLA's RngBitGenerator, not threefry
        # (train.py L1474-1481, train_compile.py L300-303). Only the int8 step draws any.
        jax.config.update("jax_default_prng_impl", "unsafe_rbg")
        flags = os.environ.get("LIBTPU_INIT_ARGS", "")
        if "xla_tpu_spmd_rng_bit_generator_unsafe" not in flags:
            os.environ["LIBTPU_INIT_ARGS"] = (
                flags + " --xla_tpu_spmd_rng_bit_generator_unsafe=true").strip()
    dump = tempfile.mkdtemp(prefix="tpusim_buffers_")
    xla_flags = os.environ.get("XLA_FLAGS")
    bundles = BundleDump() if vliw_floors else None
    try:
        buffer_dump_flag(dump)
        return _compile_step(config, overrides, name, slices, hlo_path, dump, bundles)
    finally:
        if bundles:
            bundles.close()
        shutil.rmtree(dump, ignore_errors=True)
        if xla_flags is None:
            os.environ.pop("XLA_FLAGS", None)
        else:
            os.environ["XLA_FLAGS"] = xla_flags


def _compile_step(config, overrides, name, slices, hlo_path, dump, bundles=None) -> dict:
    import jax
    from tpusim_jax.compile import cost_summary, hbm_buffers, memory_summary, topology, versions

    devices = topology(name, slices).devices
    step, args = build_step(config, devices, slices)
    result = {"format": STEP_FORMAT, "version": 1, "maxtext_args": overrides, "topology": name,
              "device_kind": devices[0].device_kind, "chips": len(devices) // slices,
              "slices_compiled": slices, "versions": versions()}
    # The compiler's flags decide its schedule (async collective fusion, windowed einsums); the
    # run's own, without the bundles dump's.
    flags = bundles.flags if bundles else os.environ.get("LIBTPU_INIT_ARGS")
    if flags:
        result["libtpu_init_args"] = flags
    with jax.default_device(devices[0]):
        lowered = step.lower(*args)
        try:
            compiled = lowered.compile()
        except Exception as e:  # libtpu's RESOURCE_EXHAUSTED arrives as a JaxRuntimeError
            oom = _OOM.search(str(e))
            if not oom:
                raise
            result.update(fits=False, message=oom.group(0).strip())
            return result
    result.update(fits=True, memory=memory_summary(compiled), cost=cost_summary(compiled))
    buffers = hbm_buffers(dump)
    if buffers:  # XLA's buffer assignment: its heap and largest HBM slots
        result["buffers"] = buffers
    hlo = compiled.as_text()
    if bundles:
        result["vliw_floors"] = floors(bundles.dir, hlo, result["device_kind"],
                                       result["versions"]["libtpu"])
    if hlo_path:
        # A .gz path is written compressed; the result names the file (beside it) for tpusim.
        opener = gzip.open if hlo_path.endswith(".gz") else open
        with opener(hlo_path, "wt") as f:
            f.write(hlo)
        result["hlo"] = os.path.basename(hlo_path)
        if config["gdn_build"] != "main":
            # The GDN kernels as tpusim programs, for the import to resolve their custom calls
            # (splash attention is resolved by name).
            kernels = collect_kernels(step, [(f"arg{i}", a) for i, a in enumerate(args)],
                                      "gdn kernels", GDN_KERNELS)
            path = re.sub(r"(\.hlo)?(\.gz)?$", "", hlo_path) + ".kernels.json"
            with open(path, "w") as f:
                json.dump(kernels, f)
            result["kernels_program"] = os.path.basename(path)
    return result
