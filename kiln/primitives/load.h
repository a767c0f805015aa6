// An array whose bytes are in a file: loading makes the array, evaluating
// reads it (as MLX's load), so a model's weights cost memory only once
// they are used. Always on the CPU stream; a GPU consumer uploads it.
#pragma once

#include <memory>

#include "kiln/core/primitive.h"
#include "kiln/io/stream.h"

namespace kiln {

class Load : public UnaryPrimitive {
 public:
  /** The output's row-major bytes at offset of file; swap_unit > 1 reverses
   *  the byte order of each such word (big-endian files). */
  Load(Stream s, std::shared_ptr<io::RandomAccessFile> file, size_t offset,
       size_t swap_unit)
      : UnaryPrimitive(s), file_(std::move(file)), offset_(offset),
        swap_unit_(swap_unit) {}
  const char* name() const override { return "Load"; }
  void eval_cpu(const std::vector<array>& inputs, array& out) override;
  std::vector<Shape> output_shapes(const std::vector<array>&) override;

 private:
  std::shared_ptr<io::RandomAccessFile> file_;
  size_t offset_;
  size_t swap_unit_;
};

} // namespace kiln
