"""tpusim's bridge to the JAX world: export JAX functions with Pallas kernels as tpusim programs.

`python -m tpusim_jax export MODULE:FUNCTION --arg NAME=SHAPE:DTYPE ... -o program.json` traces the
function, turns every pallas_call into a tpusim kernel (grid, dimension semantics, BlockSpecs with
affine index maps, scratch, the body's ops) and writes the program as JSON (docs/jax_bridge.md).
"""
import os

# Exports trace on the CPU (Pallas in interpret mode for the check data). With libtpu installed
# (for compiling against a TPU topology) JAX would otherwise try to open a TPU this host lacks.
os.environ.setdefault("JAX_PLATFORMS", "cpu")
