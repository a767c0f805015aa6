"""kiln.core.fast.cuda_kernel and precompiled_cuda_kernel: argument errors
everywhere; on the GPU, MLX's documented example with only its import
changed, strided inputs, several outputs with init_value, template
arguments, and errors from a kernel that does not compile."""

import numpy as np
import pytest

import kiln.core as mx

gpu = pytest.mark.skipif(not mx.is_available(mx.gpu), reason="no GPU")


def exp_kernel():
    source = """
        auto elem = cooperative_groups::this_grid().thread_rank();
        T tmp = inp[elem];
        out[elem] = exp(tmp);
    """
    return mx.fast.cuda_kernel(name="myexp", input_names=["inp"],
                               output_names=["out"], source=source)


def test_bad_definitions_raise():
    with pytest.raises(ValueError, match=r"\[cuda_kernel\].*not a C identifier"):
        mx.fast.cuda_kernel(name="my-exp", input_names=["a"], output_names=["o"], source="")
    with pytest.raises(ValueError, match="at least one output"):
        mx.fast.cuda_kernel(name="k", input_names=["a"], output_names=[], source="")
    with pytest.raises(ValueError, match="appears twice"):
        mx.fast.cuda_kernel(name="k", input_names=["a", "a"], output_names=["o"], source="")
    with pytest.raises(TypeError):
        mx.fast.cuda_kernel("k", ["a"], ["o"])  # no source


def test_bad_calls_raise(rng):
    k = exp_kernel()
    a = mx.array(rng.standard_normal((4, 4)).astype(np.float32))
    args = dict(inputs=[a], template=[("T", mx.float32)], grid=(16, 1, 1), threadgroup=(256, 1, 1),
                output_shapes=[a.shape], output_dtypes=[a.dtype])
    with pytest.raises(TypeError):
        k([a])  # keyword-only, as in MLX
    with pytest.raises(ValueError, match="takes 1 inputs, got 2"):
        k(**{**args, "inputs": [a, a]})
    with pytest.raises(ValueError, match="1 to 1024 threads"):
        k(**{**args, "threadgroup": (2048, 1, 1)})
    with pytest.raises(TypeError, match="template argument 'T'"):
        k(**{**args, "template": [("T", "float")]})
    with pytest.raises(ValueError, match="GPU only"):
        k(**args, stream=mx.cpu)
    with pytest.raises(TypeError, match="a scalar must be"):
        mx.fast.precompiled_cuda_kernel(
            name="f", compiled_source=b"ptx", inputs=[a], output_shapes=[(2,)],
            output_dtypes=[mx.float32], scalars=["x"], grid=(1, 1, 1), threadgroup=(1, 1, 1))


@gpu
def test_mlx_documented_example(rng):
    # MLX's docstring example, imports changed.
    def exp_elementwise(a):
        outputs = exp_kernel()(
            inputs=[a], template=[("T", mx.float32)], grid=(a.size, 1, 1), threadgroup=(256, 1, 1),
            output_shapes=[a.shape], output_dtypes=[a.dtype])
        return outputs[0]

    a = mx.array(rng.standard_normal((16, 16)).astype(np.float32)).astype(mx.float16)
    b = exp_elementwise(a)
    assert b.dtype == mx.float16 and b.shape == (16, 16)
    assert mx.allclose(b, mx.exp(a)).item()
    ref = np.exp(np.array(a.astype(mx.float32)).astype(np.float64))
    np.testing.assert_allclose(np.array(b.astype(mx.float32)), ref, rtol=2e-3)


@gpu
def test_strided_inputs_with_and_without_copies(rng):
    base = mx.array(rng.standard_normal((9, 13)).astype(np.float32))
    x = base.T[::2]  # (7, 9), neither row- nor column-major
    source = """
        uint32_t elem = blockIdx.x * blockDim.x + threadIdx.x;
        if (elem < out_size) {
            out[elem] = inp[elem_to_loc(elem, inp_shape, inp_strides, inp_ndim)] * 2;
        }
    """
    for row_contiguous in (True, False):
        k = mx.fast.cuda_kernel(name="twice", input_names=["inp"], output_names=["out"],
                                header="", source=source.replace("out_size", str(x.size)),
                                ensure_row_contiguous=row_contiguous)
        (y,) = k(inputs=[x], grid=(x.size, 1, 1), threadgroup=(32, 1, 1),
                 output_shapes=[x.shape], output_dtypes=[x.dtype])
        np.testing.assert_array_equal(np.array(y), np.array(x) * 2)


@gpu
def test_outputs_with_init_value_and_templates(rng):
    idx = rng.integers(0, 11, size=3000).astype(np.int32)
    k = mx.fast.cuda_kernel(
        name="hist", input_names=["idx"], output_names=["counts", "scaled"],
        source="""
            uint32_t i = blockIdx.x * blockDim.x + threadIdx.x;
            if (i < idx_shape[0]) {
                atomicAdd(&counts[idx[i]], OutT(1));
                scaled[i] = SCALE * idx[i] + (NEG ? -1 : 1);
            }
        """)
    counts, scaled = k(inputs=[mx.array(idx)], template=[("OutT", mx.float32), ("SCALE", 3), ("NEG", True)],
                       grid=(idx.size, 1, 1), threadgroup=(128, 1, 1), output_shapes=[(11,), idx.shape],
                       output_dtypes=[mx.float32, mx.int32], init_value=2.0)
    np.testing.assert_array_equal(np.array(counts), np.bincount(idx, minlength=11) + 2.0)
    np.testing.assert_array_equal(np.array(scaled), 3 * idx - 1)


@gpu
def test_compile_error_raises_and_verbose_prints(capfd):
    k = mx.fast.cuda_kernel(name="broken", input_names=["x"], output_names=["y"],
                            source="y[0] = not_declared_anywhere;")
    (y,) = k(inputs=[mx.array([1.0])], grid=(1, 1, 1), threadgroup=(1, 1, 1), output_shapes=[(1,)],
             output_dtypes=[mx.float32], verbose=True)
    # The source is printed by C++ to file descriptor 1 (capfd, not capsys).
    assert "__global__ void custom_kernel_broken(" in capfd.readouterr().out
    with pytest.raises(RuntimeError, match="not_declared_anywhere"):
        mx.eval(y)
    assert mx.exp(mx.array([0.0])).item() == 1.0


def test_metal_kernel_is_made_and_raises_when_run():
    # As MLX's off Apple silicon: defining one works, running it raises.
    k = mx.fast.metal_kernel(name="k", input_names=["a"], output_names=["o"], source="")
    with pytest.raises(RuntimeError, match="no Metal backend"):
        k(inputs=[mx.array([1.0])], grid=(1, 1, 1), threadgroup=(1, 1, 1), output_shapes=[(1,)],
          output_dtypes=[mx.float32])
