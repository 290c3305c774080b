"""Command line of the JAX bridge: `python -m tpusim_jax export ...` (see --help)."""
import sys

from tpusim_jax.cli import main

sys.exit(main(sys.argv[1:]))
