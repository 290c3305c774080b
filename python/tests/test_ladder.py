"""The Pallas inversion ladder (python/examples/gdn_invert_ladder.py) in interpret mode on the CPU
against an independent reference, jax.scipy.linalg.solve_triangular, as the PR's tests check the
original (gdn_kernels.md 10: [1, 8, 2, 128, 128] exercises tile_n = 8; tolerance 1e-5)."""
import os
import sys
import unittest

import jax
import jax.numpy as jnp
from jax.experimental.pallas import tpu as pltpu

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "examples"))

import gdn_invert_ladder as ladder  # noqa: E402


def strictly_lower(shape, seed=0):
    s = jax.random.normal(jax.random.PRNGKey(seed), shape, jnp.float32) * 0.1
    return jnp.tril(s, k=-1)


class LadderTest(unittest.TestCase):
    def check(self, shape):
        s = strictly_lower(shape)
        with pltpu.force_tpu_interpret_mode():
            a = ladder.invert_ladder(s)
        c = shape[-1]
        eye = jnp.eye(c, dtype=jnp.float32)
        want = jax.scipy.linalg.solve_triangular(eye + s, jnp.broadcast_to(eye, s.shape),
                                                 lower=True, unit_diagonal=True)
        err = float(jnp.max(jnp.abs(a - want)))
        self.assertLess(err, 1e-5, f"max |ladder - solve_triangular| = {err}")

    def test_tile_n_8_at_c_128(self):
        self.check((1, 8, 2, 128, 128))

    def test_small_chunks_tile_n_4(self):
        self.check((2, 4, 3, 32, 32))

    def test_vjp_against_autodiff_of_solve_triangular(self):
        # The PR's gradient shape and tolerance (gdn_kernels.md 10: [1, 4, 2, 32, 32], 2e-3
        # relative); a random cotangent rather than all ones, so every entry matters.
        shape = (1, 4, 2, 32, 32)
        s = strictly_lower(shape)
        w = jax.random.normal(jax.random.PRNGKey(1), shape, jnp.float32)
        eye = jnp.eye(shape[-1], dtype=jnp.float32)

        def by_solve(x):
            a = jax.scipy.linalg.solve_triangular(eye + jnp.tril(x, k=-1),
                                                  jnp.broadcast_to(eye, x.shape),
                                                  lower=True, unit_diagonal=True)
            return jnp.sum(a * w)

        with jax.default_matmul_precision("highest"):
            want = jnp.tril(jax.grad(by_solve)(s), k=-1)
            with pltpu.force_tpu_interpret_mode():
                got = ladder.invert_unit_lower_grad(s, w)
        err = float(jnp.max(jnp.abs(got - want)) / jnp.max(jnp.abs(want)))
        self.assertLess(err, 2e-3, f"relative error of dS {err}")
        self.assertEqual(float(jnp.max(jnp.abs(jnp.triu(got)))), 0.0)


if __name__ == "__main__":
    unittest.main()
