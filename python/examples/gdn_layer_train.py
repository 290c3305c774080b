"""One Qwen3-Next GDN decoder layer as C1 trains it, on one chip: the mixer of
python/tpusim_jax/gdn_step.py (RMSNorm, the qkvz and ba projections, the causal conv, q/k repeated
and L2-normalised, the gates, the chunked rule of the build, the gated norm, the output
projection) and the SwiGLU MLP, rematerialised (remat_policy full) and differentiated with respect
to the input and every weight, at C1's shape (T 4096, E 4096, 16 key / 32 value heads of 128,
MLP 12288, chunk 128). Its compiled program, simulated with its VLIW floors, is what the step
model's "gdn layer" part is compared with (docs/kernels/gdn.md, "The layer against its compiled
program"; tests/jax/gdn_layer_floors.sh).

  .venv/bin/python -m tpusim_jax compile python/examples/gdn_layer_train.py:heads \
      --topology v5e:2x2 --vliw-floors -o gdn_layer_heads $(python/examples/gdn_layer_train.py)

(the script prints the --arg list: x, then the weights in order).
"""
import sys

import jax
import jax.numpy as jnp

HK, HV, D, CHUNK, E, MLP, T, CONV = 16, 32, 128, 128, 4096, 12288, 4096, 4

ARGS = [("x", (1, T, E), "bf16"), ("gdn_norm_1", (E,), "f32"),
        ("w_qkvz", (E, 2 * HK * D + 2 * HV * D), "f32"), ("w_ba", (E, 2 * HV), "f32"),
        ("conv", (CONV, 2 * HK * D + HV * D), "f32"), ("a_log", (HV,), "f32"),
        ("dt_bias", (HV,), "f32"), ("gated_norm", (D,), "f32"), ("w_out", (HV * D, E), "f32"),
        ("mlp_norm", (E,), "f32"), ("wi_0", (E, MLP), "f32"), ("wi_1", (E, MLP), "f32"),
        ("wo", (MLP, E), "f32")]


def bf16(w):
    return w.astype(jnp.bfloat16)


def norm(x, scale):
    x32 = x.astype(jnp.float32)
    y = x32 * jax.lax.rsqrt(jnp.mean(x32 * x32, -1, keepdims=True) + 1e-5)
    return (y * scale).astype(jnp.bfloat16)


def _train(build):
    from tpusim_jax.gdn_kernel_rule import kernel_rule
    from tpusim_jax.gdn_step import gdn_mixer
    mixer = gdn_mixer(HK, HV, D, D, CHUNK, norm, bf16, None if build == "main" else kernel_rule(build))

    def layer(x, p):
        x = x + mixer(x, p)
        h = norm(x, p["mlp_norm"])
        a = jax.nn.silu(jnp.einsum("bse,ef->bsf", h, bf16(p["wi_0"]))) * jnp.einsum(
            "bse,ef->bsf", h, bf16(p["wi_1"]))
        return x + jnp.einsum("bsf,fe->bse", a, bf16(p["wo"]))

    def loss(x, p):
        o = jax.checkpoint(layer)(x, p).astype(jnp.float32)
        return 0.5 * jnp.sum(o * jax.lax.stop_gradient(o))

    def train(x, *weights):
        return jax.grad(loss, argnums=(0, 1))(x, dict(zip([n for n, _, _ in ARGS[1:]], weights)))
    return train


main, scan, heads, ladder = (_train(b) for b in ("main", "scan", "heads", "ladder"))

if __name__ == "__main__":
    sys.stdout.write(" ".join(f"--arg {n}={'x'.join(map(str, s))}:{t}" for n, s, t in ARGS) + "\n")
