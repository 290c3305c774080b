"""tpusim's bridge to the JAX world: export JAX functions with Pallas kernels as tpusim programs.

`python -m tpusim_jax export MODULE:FUNCTION --arg NAME=SHAPE:DTYPE ... -o program.json` traces the
function, turns every pallas_call into a tpusim kernel (grid, dimension semantics, BlockSpecs with
affine index maps, scratch, the body's ops) and writes the program as JSON (docs/jax_bridge.md).
"""
