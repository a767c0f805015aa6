"""block_masked_mm, composed from kiln.core ops (masks and matmul) with
MLX's signature and results: it costs a mask product more than a fused
kernel would."""

import math


def install(core):
    mx = core

    def _expand_blocks(mask, rows, cols, block_size):
        m = mx.repeat(mx.repeat(mask, block_size, axis=-2), block_size, axis=-1)
        return m[..., :rows, :cols]

    def block_masked_mm(a, b, /, block_size=64, mask_out=None, mask_lhs=None, mask_rhs=None, *, stream=None):
        """matmul(a, b) with block_size x block_size blocks of the operands
        and the output masked (boolean masks) or scaled (float masks)."""
        a, b = mx.asarray(a), mx.asarray(b)
        if block_size not in (32, 64):
            raise ValueError(f"[block_masked_mm] block_size must be 32 or 64, got {block_size}.")
        if a.ndim < 2 or b.ndim < 2 or a.shape[-1] != b.shape[-2]:
            raise ValueError(
                f"[block_masked_mm] cannot multiply shapes {tuple(a.shape)} and {tuple(b.shape)}."
            )
        m, k, n = a.shape[-2], a.shape[-1], b.shape[-1]

        def apply(x, mask, rows, cols):
            if mask is None:
                return x
            mask = mx.asarray(mask)
            want = (math.ceil(rows / block_size), math.ceil(cols / block_size))
            if tuple(mask.shape[-2:]) != want:
                raise ValueError(
                    f"[block_masked_mm] a mask for a ({rows}, {cols}) operand must end in "
                    f"{want}, got shape {tuple(mask.shape)}."
                )
            full = _expand_blocks(mask, rows, cols, block_size)
            if full.dtype == mx.bool_:
                return mx.where(full, x, mx.zeros_like(x))
            return x * full.astype(x.dtype)

        out = mx.matmul(apply(a, mask_lhs, m, k), apply(b, mask_rhs, k, n), stream=stream)
        return apply(out, mask_out, m, n)

    for f in (block_masked_mm,):
        f.__module__ = "kiln.core"
        setattr(core, f.__name__, f)
