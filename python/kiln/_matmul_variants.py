"""gather_qmm and block_masked_mm, composed from kiln.core ops (gather_mm,
take, dequantize, masks and matmul) with MLX's signatures and results. They
cost a gather or a mask product more than a fused kernel would."""

import math


def install(core):
    mx = core

    def _batch_indices(x, idx, name, op):
        batch = x.shape[:-2]
        n = math.prod(batch)
        flat = x.reshape(n, *x.shape[-2:])
        if idx is None:
            idx = mx.arange(n, dtype=mx.uint32).reshape(batch)
        else:
            idx = mx.asarray(idx)
            if not mx.issubdtype(idx.dtype, mx.integer):
                raise ValueError(
                    f"[{op}] {name} must be integers, got {idx.dtype} "
                    f"for operands of shapes {tuple(x.shape)}."
                )
        return flat, idx

    def _pairs(a, b, lhs_indices, rhs_indices, op, stream):
        """a's picked batch matrices (gathered), b's batch matrices with the
        flat indices picking them, and the indices' broadcast shape."""
        if a.ndim < 2 or b.ndim < 2:
            raise ValueError(
                f"[{op}] operands need at least 2 dimensions, got shapes "
                f"{tuple(a.shape)} and {tuple(b.shape)}."
            )
        fa, li = _batch_indices(a, lhs_indices, "lhs_indices", op)
        fb, ri = _batch_indices(b, rhs_indices, "rhs_indices", op)
        li, ri = mx.broadcast_arrays(li, ri)
        left = mx.take(fa, li.reshape(-1), axis=0, stream=stream)
        return left, fb, ri.reshape(-1), li.shape

    def gather_qmm(x, w, /, scales, biases=None, lhs_indices=None, rhs_indices=None, transpose=True,
                   group_size=None, bits=None, mode="affine", global_scale=None, *, sorted_indices=False,
                   stream=None):
        """gather_mm with a quantized ``w`` (quantized_matmul's arguments):
        the batch matrices of ``x`` and of the dequantized ``w`` picked by
        flat batch indices."""
        if global_scale is not None:
            raise ValueError("[gather_qmm] global_scale (nvfp4's second-level scale) is not supported by kiln.")
        if (biases is None) != (mode != "affine"):
            raise ValueError(f"[gather_qmm] the affine mode needs biases (from quantize) and the others have "
                             f"none; got mode {mode!r} with biases {'None' if biases is None else 'given'}.")
        x, w, scales = mx.asarray(x), mx.asarray(w), mx.asarray(scales)
        biases = None if biases is None else mx.asarray(biases)
        if scales.shape[:-2] != w.shape[:-2] or (biases is not None and biases.shape != scales.shape):
            raise ValueError(
                f"[gather_qmm] scales {tuple(scales.shape)} (and biases) must share the batch dimensions "
                f"of w {tuple(w.shape)}."
            )
        left, fw, ri, shape = _pairs(x, w, lhs_indices, rhs_indices, "gather_qmm", stream)
        experts = fw.shape[0]
        flat = lambda a: None if a is None else a.reshape(experts, *a.shape[-2:])
        kw = dict(group_size=group_size, bits=bits, mode=mode, stream=stream)
        if ri.size * x.shape[-2] >= 8 * experts:
            # Many rows per matrix: dequantize each matrix once, and
            # gather_mm reads the picked ones in place (one GEMM per matrix
            # on the CPU). Fewer (decode) read each pick's packed codes.
            dt = x.dtype if mx.issubdtype(x.dtype, mx.floating) else mx.float32
            wd = mx.dequantize(fw, flat(scales), flat(biases), dtype=dt, **kw)
            wd = wd.reshape(*w.shape[:-2], *wd.shape[-2:])
            return mx.gather_mm(x, mx.swapaxes(wd, -1, -2) if transpose else wd, lhs_indices,
                                rhs_indices, sorted_indices=sorted_indices, stream=stream)
        pick = lambda a: None if a is None else mx.take(a, ri, axis=0, stream=stream)
        out = mx.quantized_matmul(left, pick(fw), pick(flat(scales)), pick(flat(biases)),
                                  transpose=transpose, **kw)
        return out.reshape(*shape, *out.shape[-2:])

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

    for f in (gather_qmm, block_masked_mm):
        f.__module__ = "kiln.core"
        setattr(core, f.__name__, f)
