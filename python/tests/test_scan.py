"""The Pallas inter-chunk scan (python/examples/gdn_scan.py) in interpret mode on the CPU, as the
PR's tests check the original (gdn_kernels.md 10: B=2, N=4, H=3 so th=1, C=128, Dk=Dv=128, f32
compute): the forward against the gated delta rule one token at a time, the backward against
jax.vjp of an independent jnp formulation (a lax.scan over chunks)."""
import os
import sys
import unittest

import jax
import jax.numpy as jnp
from jax.experimental.pallas import tpu as pltpu

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "examples"))

import gdn_scan as scan  # noqa: E402

B, N, H, C, D = 2, 4, 3, 128, 128


def rel_err(got, want):
    return float(jnp.max(jnp.abs(got - want)) / jnp.max(jnp.abs(want)))


def tokens(seed=0):
    ks = jax.random.split(jax.random.PRNGKey(seed), 6)
    q, k = (x / jnp.linalg.norm(x, axis=-1, keepdims=True)
            for x in (jax.random.normal(kk, (B, N * C, H, D)) for kk in ks[:2]))
    v = jax.random.normal(ks[2], (B, N * C, H, D))
    g = -0.1 * jax.random.uniform(ks[3], (B, N * C, H))
    beta = jax.random.uniform(ks[4], (B, N * C, H))
    h0 = 0.1 * jax.random.normal(ks[5], (B, H, D, D))
    return q, k, v, g, beta, h0


class ScanTest(unittest.TestCase):
    def test_head_tile_is_maxtexts(self):
        self.assertEqual([scan.head_tile(h) for h in (32, 12, 6, 3, 1)], [8, 4, 2, 1, 1])
        self.assertEqual(scan.head_tile(32, max_tile=4), 4)

    def test_forward_against_the_per_token_recurrence(self):
        q, k, v, g, beta, h0 = tokens()
        with jax.default_matmul_precision("highest"):
            o_want, h_want = scan.per_token(q, k, v, g, beta, h0)
            w, u, qc, kc, gc = scan.chunk_inputs(q, k, v, g, beta, C)
            with pltpu.force_tpu_interpret_mode():
                o, h_saved, h_final = scan.scan_fwd(w, u, qc, kc, gc, h0)
        o = o.swapaxes(2, 3).reshape(B, N * C, H, D)
        self.assertLess(rel_err(o, o_want), 1e-5)
        self.assertLess(rel_err(h_final, h_want), 1e-5)
        self.assertLess(rel_err(h_saved[:, 0], h0), 1e-7)  # the state entering chunk 0

    def test_backward_against_the_vjp_of_a_chunked_reference(self):
        f32 = jnp.float32
        avals = [jax.ShapeDtypeStruct((B, N, H, C, D), f32)] * 4 + [
            jax.ShapeDtypeStruct((B, N, H, C, 1), f32), jax.ShapeDtypeStruct((B, H, D, D), f32)]
        args = scan.scan_inputs(jax.random.PRNGKey(1), avals)
        ks = jax.random.split(jax.random.PRNGKey(2), 2)
        d_o = jax.random.normal(ks[0], (B, N, H, C, D))
        dh_final = jax.random.normal(ks[1], (B, H, D, D))
        with jax.default_matmul_precision("highest"):
            _, vjp = jax.vjp(scan.scan_reference, *args)
            want = vjp((d_o, dh_final))
            with pltpu.force_tpu_interpret_mode():
                _, h_saved, _ = scan.scan_fwd(*args)
                got = scan.scan_bwd(*args[:5], h_saved, d_o, dh_final)
        for name, a, b in zip(("dw", "du", "dq", "dk", "dg", "dh0"), got, want):
            self.assertLess(rel_err(a, b), 1e-5, name)


if __name__ == "__main__":
    unittest.main()
