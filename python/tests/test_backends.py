import pytest

import kiln.core as mx


def test_cuda_module_reports_the_gpu():
    import kiln.core.cuda as cuda

    assert cuda.is_available() == mx.is_available(mx.gpu)


def test_metal_module_is_present_but_unavailable():
    import kiln.core.metal as metal

    assert metal.is_available() is False
    assert metal.get_active_memory() == mx.get_active_memory()
    with pytest.raises(RuntimeError, match="no Metal backend"):
        metal.start_capture("trace.gputrace")
