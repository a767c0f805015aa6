"""Loss functions, as in ``mlx.nn.losses``: same names, arguments, default
reductions and results. Each takes ``reduction`` in ``'none'`` (the
elementwise losses), ``'mean'`` or ``'sum'``."""

import math
from typing import Literal, Optional, get_args

import kiln.core as mx

Reduction = Literal["none", "mean", "sum"]


def _reduce(loss, reduction: Reduction = "none"):
    if reduction not in get_args(Reduction):
        raise ValueError(f"Invalid reduction {reduction!r}. Must be one of {get_args(Reduction)}.")
    if reduction == "mean":
        return mx.mean(loss)
    if reduction == "sum":
        return mx.sum(loss)
    return loss


def _check_same_shape(fn, what_a, a, what_b, b):
    if a.shape != b.shape:
        raise ValueError(
            f"[{fn}] {what_a} shape {tuple(a.shape)} does not match "
            f"{what_b} shape {tuple(b.shape)}."
        )


def _apply_weights(fn, loss, weights):
    if weights is None:
        return loss
    if weights.shape != loss.shape:
        raise ValueError(
            f"[{fn}] Weights with shape {tuple(weights.shape)} is not the same as "
            f"output loss with shape {tuple(loss.shape)}."
        )
    return loss * weights


def _pick(x, index, axis):
    """``x`` at ``index`` along ``axis`` (``index`` has ``x``'s shape
    without ``axis``)."""
    return mx.take_along_axis(x, mx.expand_dims(index, axis), axis).squeeze(axis)


def cross_entropy(
    logits: mx.array,
    targets: mx.array,
    weights: Optional[mx.array] = None,
    axis: int = -1,
    label_smoothing: float = 0.0,
    reduction: Reduction = "none",
) -> mx.array:
    """Cross entropy of unnormalized ``logits`` against ``targets`` that are
    either class indices (``logits``' shape without ``axis``) or
    probabilities (``logits``' shape). ``label_smoothing`` in ``[0, 1)``
    mixes the target with the uniform distribution; ``weights`` scale the
    per-sample losses."""
    if label_smoothing < 0 or label_smoothing >= 1:
        raise ValueError(f"Label smoothing must be in [0, 1), got {label_smoothing}.")
    as_probs = targets.ndim == logits.ndim
    if not as_probs:
        if logits.ndim == 0 or not -logits.ndim <= axis < logits.ndim:
            raise ValueError(
                f"[cross_entropy] axis {axis} is out of range for logits of "
                f"shape {tuple(logits.shape)}."
            )
    expected = list(logits.shape)
    if not as_probs:
        expected.pop(axis)
    if tuple(targets.shape) != tuple(expected):
        raise ValueError(
            f"[cross_entropy] Targets shape {tuple(targets.shape)} does not match "
            f"logits shape {tuple(logits.shape)}."
        )
    # Shift by the max first: the loss depends only on the gaps between
    # logits, and with large logits (1e4 and up in float32) subtracting the
    # score from logsumexp rounds the gap away. As MLX, this also shifts the
    # loss of probability targets that do not sum to 1.
    logits = logits - mx.stop_gradient(mx.max(logits, axis=axis, keepdims=True))
    if as_probs:
        score = mx.sum(logits * targets, axis=axis)
    else:
        score = _pick(logits, targets, axis)
    lse = mx.logsumexp(logits, axis=axis)
    if label_smoothing > 0:
        # (1 - s) * CE(target) + s * CE(uniform).
        uniform_term = mx.mean(logits, axis=axis) * label_smoothing
        loss = lse - (1 - label_smoothing) * score - uniform_term
    else:
        loss = lse - score
    return _reduce(_apply_weights("cross_entropy", loss, weights), reduction)


def binary_cross_entropy(
    inputs: mx.array,
    targets: mx.array,
    weights: Optional[mx.array] = None,
    with_logits: bool = True,
    reduction: Reduction = "mean",
) -> mx.array:
    """Binary cross entropy of ``inputs`` (logits when ``with_logits``,
    else probabilities) against ``targets`` in ``[0, 1]``."""
    _check_same_shape("binary_cross_entropy", "Inputs", inputs, "targets", targets)
    if with_logits:
        # -t log s(x) - (1 - t) log(1 - s(x)) = log(1 + e^x) - t x
        loss = mx.logaddexp(0.0, inputs) - inputs * targets
    else:
        # log(0) is clipped to -100 (as PyTorch and MLX do) so the loss stays
        # finite for saturated probabilities.
        log_p = mx.clip(mx.log(inputs), -100, None)
        log_1mp = mx.clip(mx.log(1 - inputs), -100, None)
        loss = -(targets * log_p + (1 - targets) * log_1mp)
    return _reduce(_apply_weights("binary_cross_entropy", loss, weights), reduction)


def l1_loss(predictions: mx.array, targets: mx.array, reduction: Reduction = "mean") -> mx.array:
    """``|predictions - targets|``."""
    _check_same_shape("l1_loss", "Predictions", predictions, "targets", targets)
    return _reduce(mx.abs(predictions - targets), reduction)


def mse_loss(predictions: mx.array, targets: mx.array, reduction: Reduction = "mean") -> mx.array:
    """``(predictions - targets)^2``."""
    _check_same_shape("mse_loss", "Predictions", predictions, "targets", targets)
    return _reduce(mx.square(predictions - targets), reduction)


def nll_loss(
    inputs: mx.array, targets: mx.array, axis: int = -1, reduction: Reduction = "none"
) -> mx.array:
    """Negative log likelihood: minus the log-probability ``inputs`` at the
    class indices ``targets`` along ``axis``."""
    return _reduce(-_pick(inputs, targets, axis), reduction)


def gaussian_nll_loss(
    inputs: mx.array,
    targets: mx.array,
    vars: mx.array,
    full: bool = False,
    eps: float = 1e-6,
    reduction: Reduction = "mean",
) -> mx.array:
    """Negative log likelihood of ``targets`` under ``N(inputs, vars)``;
    ``vars`` is clamped to at least ``eps``, and ``full`` adds the
    constant ``log(2 pi) / 2``."""
    _check_same_shape("gaussian_nll_loss", "Inputs", inputs, "targets", targets)
    _check_same_shape("gaussian_nll_loss", "Inputs", inputs, "vars", vars)
    vars = mx.maximum(vars, eps)
    loss = 0.5 * (mx.log(vars) + mx.square(targets - inputs) / vars)
    if full:
        loss = loss + 0.5 * math.log(2 * math.pi)
    return _reduce(loss, reduction)


def kl_div_loss(
    inputs: mx.array, targets: mx.array, axis: int = -1, reduction: Reduction = "none"
) -> mx.array:
    """Kullback-Leibler divergence ``KL(targets || inputs)`` of two
    log-probability arrays, summed along ``axis``."""
    loss = mx.sum(mx.exp(targets) * (targets - inputs), axis)
    return _reduce(loss, reduction)


def smooth_l1_loss(
    predictions: mx.array, targets: mx.array, beta: float = 1.0, reduction: Reduction = "mean"
) -> mx.array:
    """``0.5 d^2 / beta`` where ``d = |predictions - targets| < beta``, else
    ``d - 0.5 beta``."""
    _check_same_shape("smooth_l1_loss", "Predictions", predictions, "targets", targets)
    d = mx.abs(predictions - targets)
    loss = mx.where(d < beta, 0.5 * mx.square(d) / beta, d - 0.5 * beta)
    return _reduce(loss, reduction)


def triplet_loss(
    anchors: mx.array,
    positives: mx.array,
    negatives: mx.array,
    axis: int = -1,
    p: int = 2,
    margin: float = 1.0,
    eps: float = 1e-6,
    reduction: Reduction = "none",
) -> mx.array:
    """``max(d(a, pos) - d(a, neg) + margin, 0)`` with ``d`` the p-norm
    distance along ``axis`` (``eps`` added under the root for a finite
    gradient at zero distance)."""

    def distance(a, b):
        return mx.power(mx.power(mx.abs(a - b), p).sum(axis) + eps, 1.0 / p)

    loss = mx.maximum(distance(anchors, positives) - distance(anchors, negatives) + margin, 0)
    return _reduce(loss, reduction)


def hinge_loss(inputs: mx.array, targets: mx.array, reduction: Reduction = "none") -> mx.array:
    """``max(1 - inputs * targets, 0)`` for targets in ``{-1, 1}``."""
    return _reduce(mx.maximum(1 - inputs * targets, 0), reduction)


def huber_loss(
    inputs: mx.array, targets: mx.array, delta: float = 1.0, reduction: Reduction = "none"
) -> mx.array:
    """``0.5 e^2`` where ``|e| <= delta``, else ``delta (|e| - 0.5 delta)``,
    with ``e = inputs - targets``."""
    abs_err = mx.abs(inputs - targets)
    quadratic = mx.minimum(abs_err, delta)
    loss = 0.5 * quadratic**2 + delta * (abs_err - quadratic)
    return _reduce(loss, reduction)


def log_cosh_loss(inputs: mx.array, targets: mx.array, reduction: Reduction = "none") -> mx.array:
    """``log(cosh(inputs - targets))``, computed without overflow."""
    e = inputs - targets
    # log cosh e = log(e^e + e^-e) - log 2
    return _reduce(mx.logaddexp(e, -e) - math.log(2), reduction)


def cosine_similarity_loss(
    x1: mx.array, x2: mx.array, axis: int = 1, eps: float = 1e-8, reduction: Reduction = "none"
) -> mx.array:
    """The cosine similarity of ``x1`` and ``x2`` along ``axis``,
    ``x1 . x2 / max(|x1| |x2|, eps)`` (as MLX: the similarity itself, not
    one minus it)."""
    norms = mx.linalg.norm(x1, axis=axis) * mx.linalg.norm(x2, axis=axis)
    loss = mx.sum(x1 * x2, axis=axis) / mx.maximum(norms, eps)
    return _reduce(loss, reduction)


def margin_ranking_loss(
    inputs1: mx.array,
    inputs2: mx.array,
    targets: mx.array,
    margin: float = 0.0,
    reduction: Reduction = "none",
) -> mx.array:
    """``max(0, -targets * (inputs1 - inputs2) + margin)`` for targets in
    ``{-1, 1}`` (1: ``inputs1`` should rank higher)."""
    if not (inputs1.shape == inputs2.shape == targets.shape):
        raise ValueError(
            "[margin_ranking_loss] The shapes of the arguments do not match. The "
            f"provided shapes are inputs1.shape={tuple(inputs1.shape)}, "
            f"inputs2.shape={tuple(inputs2.shape)}, and targets.shape={tuple(targets.shape)}."
        )
    loss = mx.maximum(0, -targets * (inputs1 - inputs2) + margin)
    return _reduce(loss, reduction)
