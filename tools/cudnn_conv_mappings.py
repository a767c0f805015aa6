"""Checks, by emulation in NumPy, the index mappings that
kiln/backend/cuda/cudnn_conv.cpp uses to run a Convolution node as one of
cuDNN's three convolution operations: a node with input dilation as cuDNN's
data gradient (dgrad), and a node with a long kernel and a short output (the
weight's vjp) as its weight gradient (wgrad). One spatial axis; the
definitions are the ones cuDNN documents for a forward convolution
y[j] = sum_k x[j S + k D - pre] w'[k] (w' = w turned around in convolution
mode) and its two gradients. Prints the number of parameter sets checked.

    .venv/bin/python tools/cudnn_conv_mappings.py
"""

import itertools

import numpy as np


def kiln_conv(x, w, stride, lo, hi, kd, idl, flip, groups=1):
    """kiln's Convolution on x (N, L, C) and w (K_out, K, C / groups): x
    dilated by idl, padded by lo and hi, out[n][o][k] = sum_{p,c} z[n][o
    stride + p kd][c] w'[k][p][c] over the channels c of k's group."""
    if groups > 1:
        xs = np.split(x, groups, axis=2)
        ws = np.split(w, groups, axis=0)
        parts = [kiln_conv(a, b, stride, lo, hi, kd, idl, flip) for a, b in zip(xs, ws)]
        return None if parts[0] is None else np.concatenate(parts, axis=2)
    n, length, c = x.shape
    taps = w.shape[1]
    wp = w[:, ::-1] if flip else w
    padded = (length - 1) * idl + 1 + lo + hi
    span = (taps - 1) * kd + 1
    if padded < span:
        return None
    z = np.zeros((n, padded, c))
    for i in range(length):
        p = lo + i * idl
        if 0 <= p < padded:
            z[:, p] = x[:, i]
    out_len = (padded - span) // stride + 1
    out = np.zeros((n, out_len, w.shape[0]))
    for o in range(out_len):
        for p in range(taps):
            out[:, o] += z[:, o * stride + p * kd] @ wp[:, p].T
    return out


def forward_len(x_len, pre, post, taps, stride, dilation):
    return (x_len + pre + post - (taps - 1) * dilation - 1) // stride + 1


def cudnn_dgrad(dy, w, stride, dilation, pre, post, dx_len, conv_mode, groups=1):
    """dx of y = conv(x, w): dy (N, L, K_out), w (K_out, K, C / groups) ->
    (N, dx_len, C)."""
    if groups > 1:
        dys = np.split(dy, groups, axis=2)
        ws = np.split(w, groups, axis=0)
        return np.concatenate([cudnn_dgrad(a, b, stride, dilation, pre, post, dx_len, conv_mode)
                               for a, b in zip(dys, ws)], axis=2)
    taps = w.shape[1]
    wf = w[:, ::-1] if conv_mode else w
    assert forward_len(dx_len, pre, post, taps, stride, dilation) == dy.shape[1]
    dx = np.zeros((dy.shape[0], dx_len, w.shape[2]))
    for j in range(dy.shape[1]):
        for k in range(taps):
            i = j * stride + k * dilation - pre
            if 0 <= i < dx_len:
                dx[:, i] += dy[:, j] @ wf[:, k]
    return dx


def cudnn_wgrad(x, dy, stride, dilation, pre, post, taps, groups=1):
    """dw of y = conv(x, w): x (N, L, C), dy (N, L_y, K_out) -> (K_out,
    taps, C / groups)."""
    if groups > 1:
        xs = np.split(x, groups, axis=2)
        dys = np.split(dy, groups, axis=2)
        return np.concatenate([cudnn_wgrad(a, b, stride, dilation, pre, post, taps)
                               for a, b in zip(xs, dys)], axis=0)
    assert forward_len(x.shape[1], pre, post, taps, stride, dilation) == dy.shape[1]
    dw = np.zeros((dy.shape[2], taps, x.shape[2]))
    for p in range(dy.shape[1]):
        for r in range(taps):
            i = p * stride + r * dilation - pre
            if 0 <= i < x.shape[1]:
                dw[:, r] += dy[:, p].T @ x[:, i]
    return dw


def group_swapped(w, groups):
    """The node's weight (C_in, K, C_out / g) as the forward's (C_out, K,
    C_in / g): channel roles swapped group by group."""
    c_in, taps, cog = w.shape
    cig = c_in // groups
    return w.reshape(groups, cig, taps, cog).transpose(0, 3, 2, 1).reshape(groups * cog, taps, cig)


def check_dgrad(rng):
    """Input dilation idl, unit stride: cuDNN's dgrad with stride idl,
    paddings span - lo and span - hi, the node's weight with its channel
    roles swapped group by group, and the mode the other way round."""
    count = 0
    for length, taps, kd, idl, lo, hi, flip, (groups, cig, cog) in itertools.product(
            range(1, 7), range(1, 5), (1, 2, 3), (2, 3), range(7), range(7),
            (False, True), ((1, 3, 4), (2, 2, 3), (3, 1, 2), (4, 1, 1))):
        span = (taps - 1) * kd
        if lo > span or hi > span:
            continue
        x = rng.standard_normal((2, length, groups * cog))
        w = rng.standard_normal((groups * cig, taps, cog))
        out = kiln_conv(x, w, 1, lo, hi, kd, idl, flip, groups)
        if out is None:
            continue
        got = cudnn_dgrad(x, group_swapped(w, groups), idl, kd, span - lo, span - hi,
                          out.shape[1], not flip, groups)
        assert np.allclose(out, got), (length, taps, kd, idl, lo, hi, flip, groups)
        count += 1
    return count


def check_wgrad(rng):
    """No input dilation or flip: cuDNN's wgrad with stride kd and dilation
    stride. The node's input (C_in/g, L, g * N) is x (N, L, C_in) with
    x[n][i][grp C_in/g + c] = input[c][i][grp N + n], its weight (K_out,
    taps, N) with its ends swapped is dy, and dw with its ends swapped is
    its output; post-padding makes the forward as long as the node's
    kernel, x cut short where negative."""
    count = 0
    for length, taps, stride, kd, lo, hi, groups in itertools.product(
            range(1, 9), range(1, 6), (1, 2, 3), (1, 2), range(4), range(-3, 4),
            (1, 2, 3)):
        cg, n, k_out = 2, 3, 2 * groups
        node_in = rng.standard_normal((cg, length, groups * n))
        node_w = rng.standard_normal((k_out, taps, n))
        out = kiln_conv(node_in, node_w, stride, lo, hi, kd, 1, False, groups)
        if out is None:
            continue
        out_len = out.shape[1]
        post = (taps - 1) * kd + (out_len - 1) * stride + 1 - length - lo
        x_len = length + min(post, 0)
        if x_len <= 0:
            continue
        # (C_in/g, L, g, N) -> (N, L, g, C_in/g) -> (N, L, C_in)
        x = node_in.reshape(cg, length, groups, n).transpose(3, 1, 2, 0)
        x = x.reshape(n, length, groups * cg)[:, :x_len]
        dy = node_w.transpose(2, 1, 0)  # (N, taps, K_out)
        dw = cudnn_wgrad(x, dy, kd, stride, lo, max(post, 0), out_len, groups)
        assert np.allclose(dw.transpose(2, 1, 0), out), (length, taps, stride, kd, lo, hi, groups)
        count += 1
    return count


if __name__ == "__main__":
    rng = np.random.default_rng(0)
    print("data gradient: %d parameter sets agree" % check_dgrad(rng))
    print("weight gradient: %d parameter sets agree" % check_wgrad(rng))
