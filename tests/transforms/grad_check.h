// Checks for transformation rules: vjp against central finite differences in
// float64, jvp against vjp through <jvp(t), c> = <t, vjp(c)>, and vmap
// against a loop over the batch.
#pragma once

#include "test_utils.h"

namespace kiln::test {

using ArrayFn = std::function<array(const std::vector<array>&)>;

/** vjp of fun at inputs (float64) with a random cotangent matches central
 *  differences for every input element, within rtol of the largest
 *  gradient entry. Inputs listed in skip are held constant. */
::testing::AssertionResult check_vjp(const ArrayFn& fun,
                                     const std::vector<array>& inputs,
                                     double rtol = 1e-6,
                                     const std::vector<int>& skip = {});

/** <jvp(t), c> equals the sum over inputs of <t_i, vjp(c)_i> for random
 *  tangents t and cotangent c. */
::testing::AssertionResult check_jvp(const ArrayFn& fun,
                                     const std::vector<array>& inputs,
                                     double rtol = 1e-8,
                                     const std::vector<int>& skip = {});

/** vmap(fun, in_axes)(inputs) equals stacking fun over the batch. */
::testing::AssertionResult check_vmap(const ArrayFn& fun,
                                      const std::vector<array>& inputs,
                                      const std::vector<int>& in_axes,
                                      double rtol = 1e-6);

/** All three checks on float64 versions of the inputs, with batches built by
 *  stacking 3 random variants along axis 0 for vmap. */
void check_transforms(const std::string& name, const ArrayFn& fun,
                      const std::vector<array>& inputs,
                      const std::vector<int>& skip = {}, double rtol = 1e-6);

} // namespace kiln::test
