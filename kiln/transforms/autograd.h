// Function transformations with MLX's semantics and signatures: vjp, jvp,
// grad, value_and_grad, vmap, custom_function / custom_vjp and checkpoint.
#pragma once

#include <functional>
#include <optional>
#include <utility>
#include <vector>

#include "kiln/core/array.h"

namespace kiln {

using Fn = std::function<std::vector<array>(const std::vector<array>&)>;

/** Outputs of fun(primals) and the cotangents of the primals for the given
 *  output cotangents (one per output, same shapes). */
std::pair<std::vector<array>, std::vector<array>> vjp(
    const Fn& fun, const std::vector<array>& primals,
    const std::vector<array>& cotangents);
std::pair<array, array> vjp(const std::function<array(const array&)>& fun,
                            const array& primal, const array& cotangent);

/** Outputs of fun(primals) and their tangents for the given input tangents
 *  (one per primal, same shapes). */
std::pair<std::vector<array>, std::vector<array>> jvp(
    const Fn& fun, const std::vector<array>& primals,
    const std::vector<array>& tangents);
std::pair<array, array> jvp(const std::function<array(const array&)>& fun,
                            const array& primal, const array& tangent);

using ValueAndGradFn =
    std::function<std::pair<std::vector<array>, std::vector<array>>(
        const std::vector<array>&)>;
using SimpleValueAndGradFn = std::function<std::pair<array, std::vector<array>>(
    const std::vector<array>&)>;

/** fun's outputs and the gradient of its first output (a scalar) with respect
 *  to the arguments in argnums. */
ValueAndGradFn value_and_grad(const Fn& fun, const std::vector<int>& argnums);
ValueAndGradFn value_and_grad(const Fn& fun, int argnum = 0);
SimpleValueAndGradFn value_and_grad(
    const std::function<array(const std::vector<array>&)>& fun,
    const std::vector<int>& argnums);
std::function<std::pair<array, array>(const array&)> value_and_grad(
    const std::function<array(const array&)>& fun);

/** Gradient of a scalar-valued function. */
std::function<std::vector<array>(const std::vector<array>&)> grad(
    const std::function<array(const std::vector<array>&)>& fun,
    const std::vector<int>& argnums);
std::function<std::vector<array>(const std::vector<array>&)> grad(
    const std::function<array(const std::vector<array>&)>& fun,
    int argnum = 0);
std::function<array(const array&)> grad(
    const std::function<array(const array&)>& fun);

/** Map fun over an axis of its inputs. in_axes: one per input (-1: not
 *  mapped); out_axes: one per output, where the mapped axis goes. */
Fn vmap(const Fn& fun, const std::vector<int>& in_axes = {},
        const std::vector<int>& out_axes = {});
std::function<array(const array&)> vmap(
    const std::function<array(const array&)>& fun, int in_axis = 0,
    int out_axis = 0);
std::function<array(const array&, const array&)> vmap(
    const std::function<array(const array&, const array&)>& fun,
    int in_axis_a = 0, int in_axis_b = 0, int out_axis = 0);

/** A vjp rule: (primals, cotangents, outputs) -> input cotangents. */
using VjpFn = std::function<std::vector<array>(
    const std::vector<array>&, const std::vector<array>&,
    const std::vector<array>&)>;
/** A jvp rule: (primals, tangents, argnums) -> output tangents. */
using JvpFn = std::function<std::vector<array>(
    const std::vector<array>&, const std::vector<array>&,
    const std::vector<int>&)>;
/** A vmap rule: (inputs, axes) -> (outputs, output axes). */
using VmapFn = std::function<std::pair<std::vector<array>, std::vector<int>>(
    const std::vector<array>&, const std::vector<int>&)>;

/** fun with user-defined transformation rules; absent rules fall back to
 *  transforming fun itself. */
Fn custom_function(Fn fun, std::optional<VjpFn> fun_vjp = std::nullopt,
                   std::optional<JvpFn> fun_jvp = std::nullopt,
                   std::optional<VmapFn> fun_vmap = std::nullopt);
Fn custom_vjp(Fn fun, VjpFn fun_vjp);

/** fun whose intermediates are recomputed in the backward pass instead of
 *  being kept alive between the forward and backward passes. */
Fn checkpoint(Fn fun);

namespace detail {
/** True while some transformation is tracing a function in this thread. */
bool in_tracing();
/** Zero arrays shaped like each given array. */
std::vector<array> zeros_like_all(const std::vector<array>& arrays);
} // namespace detail

} // namespace kiln
