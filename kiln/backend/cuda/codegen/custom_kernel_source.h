// The CUDA source text of fast.cuda_kernel's kernels, written on the host
// in every build (see custom_kernel_source.cpp).
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "kiln/ops/fast.h"

namespace kiln::cuda {

/** The CUDA spelling of dt ("float", "__half", ...); throws naming op and
 *  `who` (an input, output or template argument) for a dtype GPU kernels
 *  do not take. */
const char* cuda_type_name(Dtype dt, const char* op, const std::string& who);

/** The full source fast.cuda_kernel generates for one call, and the
 *  kernel's function name in it. */
std::pair<std::string, std::string> custom_kernel_source(
    const std::string& name, const std::vector<std::string>& input_names,
    const std::vector<array>& inputs,
    const std::vector<fast::CustomKernelShapeInfo>& shape_infos,
    const std::vector<std::string>& output_names,
    const std::vector<Dtype>& output_dtypes,
    const fast::TemplateArgs& template_args, const std::string& source,
    const std::string& header);

} // namespace kiln::cuda
