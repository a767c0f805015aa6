"""kiln.core.fft.stft and istft, as MLX's: built from the transforms, pad,
gathers of frames and an overlap-add, so they run on every device and
transformations reach through them."""

_PAD_MODES = {"reflect", "constant", "edge"}


def install(core):
    fft = core.fft

    def _window(window, win_length, n_fft, name):
        if win_length < 1 or win_length > n_fft:
            raise ValueError(f"[{name}] win_length must be in [1, n_fft = {n_fft}]; got {win_length}.")
        if window is None:
            w = core.ones((win_length,), dtype=core.float32)
        else:
            w = core.array(window)
            if w.ndim != 1 or w.shape[0] != win_length:
                raise ValueError(f"[{name}] window must be one-dimensional of length win_length = "
                                 f"{win_length}; got shape {tuple(w.shape)}.")
        left = (n_fft - win_length) // 2
        return core.pad(w, [(left, n_fft - win_length - left)])

    def _frame_index(n_frames, n_fft, hop):
        return core.arange(n_frames)[:, None] * hop + core.arange(n_fft)[None, :]

    def stft(x, n_fft=2048, hop_length=None, win_length=None, window=None, center=True,
             pad_mode="reflect", norm="backward", onesided=None, stream=None):
        x = core.array(x)
        if x.ndim < 1:
            raise ValueError("[stft] needs an array of at least one dimension; got a scalar.")
        if n_fft < 1:
            raise ValueError(f"[stft] n_fft must be positive; got {n_fft}.")
        hop = n_fft // 4 if hop_length is None else hop_length
        if hop < 1:
            raise ValueError(f"[stft] hop_length must be positive; got {hop}.")
        if pad_mode not in _PAD_MODES:
            raise ValueError(f"[stft] pad_mode must be one of 'reflect', 'constant', 'edge'; got {pad_mode!r}.")
        w = _window(window, n_fft if win_length is None else win_length, n_fft, "stft")
        if onesided is None:
            onesided = not core.issubdtype(x.dtype, core.complexfloating)
        if onesided and core.issubdtype(x.dtype, core.complexfloating):
            raise ValueError("[stft] onesided=True needs a real input; got complex64.")
        if center:
            half = n_fft // 2
            if pad_mode == "reflect" and x.shape[-1] <= half:
                raise ValueError(f"[stft] reflect padding of {half} needs a last axis longer than that; "
                                 f"got shape {tuple(x.shape)}.")
            widths = [(0, 0)] * (x.ndim - 1) + [(half, half)]
            x = core.pad(x, widths, mode=pad_mode, stream=stream)
        length = x.shape[-1]
        if length < n_fft:
            raise ValueError(f"[stft] the signal ({length} samples after padding) is shorter than n_fft = {n_fft}.")
        n_frames = 1 + (length - n_fft) // hop
        frames = core.take(x, _frame_index(n_frames, n_fft, hop), axis=-1, stream=stream)
        frames = frames * w
        spec = (fft.rfft if onesided else fft.fft)(frames, axis=-1, norm=norm, stream=stream)
        return core.swapaxes(spec, -1, -2)

    def istft(stft_matrix, n_fft=None, hop_length=None, win_length=None, window=None, center=True,
              norm="backward", onesided=None, length=None, stream=None):
        spec = core.array(stft_matrix)
        if spec.ndim < 2:
            raise ValueError(f"[istft] needs (..., n_freq, n_frames); got shape {tuple(spec.shape)}.")
        if onesided is None:
            onesided = True
        n_freq, n_frames = spec.shape[-2], spec.shape[-1]
        if n_fft is None:
            n_fft = 2 * (n_freq - 1) if onesided else n_freq
        if n_fft < 1:
            raise ValueError(f"[istft] n_fft must be positive; got {n_fft}.")
        hop = n_fft // 4 if hop_length is None else hop_length
        if hop < 1:
            raise ValueError(f"[istft] hop_length must be positive; got {hop}.")
        w = _window(window, n_fft if win_length is None else win_length, n_fft, "istft")
        spec = core.swapaxes(spec, -1, -2)
        if onesided:
            frames = fft.irfft(spec, n=n_fft, axis=-1, norm=norm, stream=stream)
        else:
            # A real signal, as MLX returns: the real part.
            frames = core.real(fft.ifft(spec, n=n_fft, axis=-1, norm=norm, stream=stream))
        frames = frames * w
        total = n_fft + hop * (n_frames - 1)
        index = _frame_index(n_frames, n_fft, hop).reshape(-1)
        batch = frames.shape[:-2]
        out = core.zeros(batch + (total,), dtype=frames.dtype)
        out = out.at[..., index].add(frames.reshape(batch + (-1,)))
        envelope = core.zeros((total,), dtype=core.float32).at[index].add(
            core.broadcast_to(w * w, (n_frames, n_fft)).reshape(-1))
        # Samples no window covers (envelope 0) stay 0.
        envelope = core.where(envelope > 1e-11, envelope, core.ones_like(envelope))
        out = out / envelope
        start = n_fft // 2 if center else 0
        stop = total - n_fft // 2 if center else total
        if length is not None:
            stop = start + length
        out = out[..., start:min(stop, total)]
        if length is not None and out.shape[-1] < length:
            widths = [(0, 0)] * (out.ndim - 1) + [(0, length - out.shape[-1])]
            out = core.pad(out, widths)
        return out

    stft.__doc__ = ("Short-time Fourier transform: frames of n_fft samples every hop_length, windowed, "
                    "transformed; shape (..., n_freq, n_frames).")
    istft.__doc__ = ("Inverse of stft: the windowed inverse transform of each frame, overlap-added and "
                     "divided by the squared window's envelope.")
    fft.stft = stft
    fft.istft = istft
