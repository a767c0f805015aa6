#include "kiln/core/primitive.h"

#include <stdexcept>

namespace kiln {

namespace {

[[noreturn]] void not_implemented(const Primitive& p, const char* what) {
  throw std::invalid_argument(std::string("[") + p.name() + "] " + what +
                              " is not implemented.");
}

} // namespace

void Primitive::eval_gpu(const std::vector<array>&, std::vector<array>&) {
  throw std::runtime_error(std::string(name()) +
                           " has no GPU implementation.");
}

void UnaryPrimitive::eval_gpu(const std::vector<array>&, array&) {
  throw std::runtime_error(std::string(name()) +
                           " has no GPU implementation.");
}

std::vector<array> Primitive::jvp(const std::vector<array>&,
                                  const std::vector<array>&,
                                  const std::vector<int>&) {
  not_implemented(*this, "jvp");
}

std::vector<array> Primitive::vjp(const std::vector<array>&,
                                  const std::vector<array>&,
                                  const std::vector<int>&,
                                  const std::vector<array>&) {
  not_implemented(*this, "vjp");
}

std::pair<std::vector<array>, std::vector<int>> Primitive::vmap(
    const std::vector<array>&, const std::vector<int>&) {
  not_implemented(*this, "vmap");
}

std::vector<Shape> Primitive::output_shapes(const std::vector<array>&) {
  throw std::invalid_argument(
      std::string("[") + name() +
      "] cannot infer output shapes from new input shapes (shapeless "
      "compile).");
}

} // namespace kiln
