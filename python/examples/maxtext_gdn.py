"""The GDN main path as MaxText writes it: `jax_chunk_gated_delta_rule` (maxtext/models/qwen3.py of
the pinned MaxText 0.2.5 wheel, read at run time: the chunked delta rule with
jax.scipy.linalg.solve_triangular and a lax.scan over chunks), for compiling with libtpu.

  .venv/bin/python -m tpusim_jax compile python/examples/maxtext_gdn.py:main_path_train \
      --topology v5e:2x2 --arg q=1x4096x32x128:bf16 --arg k=1x4096x32x128:bf16 \
      --arg v=1x4096x32x128:bf16 --arg g=1x4096x32:f32 --arg beta=1x4096x32:bf16 -o c1_main
C1's shape: one chip's batch of 1, T 4096, the 32 value heads (query and key heads repeated to
match), head dim 128, chunk 128 (scenarios/calibration/c1/c1_main.yaml).
"""
from typing import Any

import jax
import jax.numpy as jnp
from jax import lax

from tpusim_jax.maxtext_source import function

CHUNK = 128

# The names the function's body uses; with use_qk_norm_in_gdn False and cp_axis None it calls
# neither l2norm nor gdn_cp, which are left out.
_rule = function("maxtext/models/qwen3.py", "jax_chunk_gated_delta_rule",
                 {"jax": jax, "jnp": jnp, "lax": lax, "Array": Any})


def main_path(q, k, v, g, beta):
    """The layer core's forward: o [B, T, H, Dv]."""
    o, _ = _rule(q, k, v, g, beta, chunk_size=CHUNK)
    return o


def _train(rule, remat):
    """Forward and backward as a training step runs them: the gradients of a scalar of o with
    respect to every input (the cotangent of o is o itself, so nothing is constant-folded); with
    `remat` the layer core is rematerialized (jax.checkpoint, as remat_policy full recomputes
    the decoder layer in the backward pass)."""
    def core(*args):
        o, _ = rule(*args, chunk_size=CHUNK)
        return o

    def loss(*args):
        o = (jax.checkpoint(core) if remat else core)(*args).astype(jnp.float32)
        return 0.5 * jnp.sum(o * lax.stop_gradient(o))

    return jax.grad(loss, argnums=(0, 1, 2, 3, 4))


def main_path_train(q, k, v, g, beta):
    return _train(_rule, remat=False)(q, k, v, g, beta)


def main_path_train_remat(q, k, v, g, beta):
    return _train(_rule, remat=True)(q, k, v, g, beta)


# ---- MaxText PR #4577's doubling inverse in place of solve_triangular (measured_runs.md C4) ----


@jax.custom_vjp
def doubling_inverse(m):
    """(I + S)^-1 for m = I + S, S strictly lower [..., C, C], by doubling as C4 describes it:
    ceil(log2 C) steps of A <- tril(A + A E), E <- tril(E E, -1) from A = I, E = -S, at default
    precision (this project's code from that description)."""
    c = m.shape[-1]
    eye = jnp.eye(c, dtype=m.dtype)
    a, e = jnp.broadcast_to(eye, m.shape), eye - m
    for _ in range(max(1, (c - 1).bit_length())):
        a = jnp.tril(a + a @ e)
        e = jnp.tril(e @ e, -1)
    return a


def _doubling_fwd(m):
    a = doubling_inverse(m)
    return a, a


def _doubling_bwd(a, g):
    at = a.swapaxes(-1, -2)
    return (-(at @ g @ at),)


doubling_inverse.defvjp(_doubling_fwd, _doubling_bwd)


class _JaxWithDoublingSolve:
    """`jax` for the MaxText function, except that scipy.linalg.solve_triangular(I + S, I, ...)
    is the doubling inverse of I + S."""

    class _Linalg:
        @staticmethod
        def solve_triangular(m, _identity, **_):
            return doubling_inverse(m)

    class _Scipy:
        pass

    scipy = _Scipy()
    scipy.linalg = _Linalg()

    def __getattr__(self, name):
        return getattr(jax, name)


_rule_doubling = function("maxtext/models/qwen3.py", "jax_chunk_gated_delta_rule",
                          {"jax": _JaxWithDoublingSolve(), "jnp": jnp, "lax": lax, "Array": Any})


def doubling_path_train(q, k, v, g, beta):
    """main_path_train with the doubling inverse in place of solve_triangular (C4's 'after')."""
    return _train(_rule_doubling, remat=False)(q, k, v, g, beta)


def doubling_path_train_remat(q, k, v, g, beta):
    return _train(_rule_doubling, remat=True)(q, k, v, g, beta)


# ---- the ladder build's inversion: MaxText PR #4348's Pallas ladder in place of solve_triangular ----


def _ladder_module():
    import importlib.util
    import pathlib
    path = pathlib.Path(__file__).with_name("gdn_invert_ladder.py")
    spec = importlib.util.spec_from_file_location("gdn_invert_ladder", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


class _JaxWithLadderSolve(_JaxWithDoublingSolve):
    """`jax` for the MaxText function, except that solve_triangular(I + S, I) is the Pallas
    inversion ladder of S with its custom VJP (python/examples/gdn_invert_ladder.py)."""

    class _Linalg:
        @staticmethod
        def solve_triangular(m, _identity, **_):
            return _ladder_module().invert_unit_lower(m - jnp.eye(m.shape[-1], dtype=m.dtype))

    scipy = _JaxWithDoublingSolve._Scipy()
    scipy.linalg = _Linalg()


_rule_ladder = function("maxtext/models/qwen3.py", "jax_chunk_gated_delta_rule",
                        {"jax": _JaxWithLadderSolve(), "jnp": jnp, "lax": lax, "Array": Any})


def ladder_path_train_remat(q, k, v, g, beta):
    """main_path_train_remat with the Pallas ladder in place of solve_triangular: the heads ->
    ladder step of the kernel change as the compiler lays it out (the scan stays lax.scan)."""
    return _train(_rule_ladder, remat=True)(q, k, v, g, beta)
