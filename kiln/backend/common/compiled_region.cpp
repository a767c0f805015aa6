#include "kiln/backend/common/compiled_region.h"

#include <cstdio>

#include "kiln/backend/common/jit_disk.h"
#include "kiln/backend/common/strided.h"

namespace kiln::detail {

namespace {

// Strides of in viewed at the region's shape (a broadcast view).
Strides region_strides(const array& in, const Shape& shape) {
  if (in.shape() == shape) return in.strides();
  Strides st(shape.size(), 0);
  size_t off = shape.size() - in.ndim();
  for (size_t i = 0; i < in.ndim(); ++i) {
    if (in.shape()[i] != 1) st[off + i] = in.strides()[i];
  }
  return st;
}

} // namespace

const char* dtype_code(Dtype d) {
  switch (d.val) {
    case Dtype::Val::bool_: return "b";
    case Dtype::Val::uint8: return "u8";
    case Dtype::Val::uint16: return "u16";
    case Dtype::Val::uint32: return "u32";
    case Dtype::Val::uint64: return "u64";
    case Dtype::Val::int8: return "i8";
    case Dtype::Val::int16: return "i16";
    case Dtype::Val::int32: return "i32";
    case Dtype::Val::int64: return "i64";
    case Dtype::Val::float16: return "f16";
    case Dtype::Val::float32: return "f32";
    case Dtype::Val::float64: return "f64";
    case Dtype::Val::bfloat16: return "bf16";
    default: return "c64";
  }
}


bool jit_supports(const JitKernelSpec& spec) {
  for (auto d : spec.input_dtypes) {
    if (d == complex64) return false;
  }
  for (auto& op : spec.region->ops()) {
    if (op.dtype == complex64) return false;
    auto k = op.primitive->fusion_kind();
    if (k != FusionKind::unary && k != FusionKind::binary &&
        k != FusionKind::ternary && k != FusionKind::cast) {
      return false;
    }
  }
  return true;
}

std::string jit_kernel_key(const JitKernelSpec& spec) {
  // Built on every evaluation of a region, so plain appends, no streams.
  std::string key;
  key.reserve(32 + 24 * spec.region->ops().size());
  if (spec.contiguous) {
    key += "contiguous|";
  } else if (spec.rows_width > 0) {
    key += "rows";
    key += std::to_string(spec.rows_width);
    key += '|';
  } else {
    key += "strided|";
  }
  auto& constants = spec.region->constants();
  char buf[24];
  for (size_t k = 0; k < spec.input_dtypes.size(); ++k) {
    key += dtype_code(spec.input_dtypes[k]);
    key += static_cast<char>(spec.roles[k]);
    if (spec.roles[k] == JitRole::constant) {
      std::snprintf(buf, sizeof(buf), "%llx",
                    static_cast<unsigned long long>(constants[k]->bits));
      key += buf;
    }
    key += ',';
  }
  key += '|';
  // Fusable primitives have no parameters besides the output dtype (AsType's
  // target), and the generated code calls them by name.
  for (auto& op : spec.region->ops()) {
    key += op.primitive->name();
    key += ':';
    key += dtype_code(op.dtype);
    key += '(';
    for (size_t k = 0; k < op.args.size(); ++k) {
      if (k) key += ',';
      key += std::to_string(op.args[k]);
    }
    key += ");";
  }
  key += '|';
  for (int o : spec.region->outputs()) {
    key += std::to_string(o);
    key += ',';
  }
  return key;
}

std::string jit_kernel_symbol(const JitKernelSpec& spec,
                              const std::string& key) {
  std::string s = "kiln";
  for (auto& op : spec.region->ops()) {
    if (s.size() > 48) {
      s += "_etc";
      break;
    }
    s += "_";
    s += op.primitive->name();
  }
  auto& ops = spec.region->ops();
  s += std::string("_") + dtype_code(ops[spec.region->outputs()[0]].dtype);
  s += spec.contiguous ? "_c_" : spec.rows_width > 0 ? "_r_" : "_g_";
  char buf[20];
  std::snprintf(buf, sizeof(buf), "%016llx",
                static_cast<unsigned long long>(jit_hash(key)));
  return s + buf;
}


CompiledLayout compiled_layout(const Compiled& c,
                               const std::vector<array>& inputs,
                               const Shape& shape) {
  CompiledLayout l;
  JitKernelSpec& spec = l.spec;
  spec = {&c, {}, {}, true};
  auto& constants = c.constants();
  std::vector<Strides> st(inputs.size());
  int layout = -1;      // first non-scalar input: the flat layout
  int first_array = -1; // first input that is not a baked constant
  for (size_t k = 0; k < inputs.size(); ++k) {
    spec.input_dtypes.push_back(inputs[k].dtype());
    if (constants[k]) {
      spec.roles.push_back(JitRole::constant);
      continue;
    }
    if (first_array < 0) first_array = static_cast<int>(k);
    st[k] = region_strides(inputs[k], shape);
    Layout in = inputs[k].shape() == shape
                    ? Layout{inputs[k].data_size(), inputs[k].flags()}
                    : layout_of(shape, st[k]);
    if (in.data_size == 1) {
      spec.roles.push_back(JitRole::scalar);
      continue;
    }
    spec.roles.push_back(JitRole::vector);
    if (!in.flags.contiguous) {
      spec.contiguous = false;
    } else if (layout < 0) {
      layout = static_cast<int>(k);
      l.flat = in;
    } else if (st[k] != st[layout] || in.data_size != l.flat.data_size) {
      spec.contiguous = false;
    }
  }
  if (!spec.contiguous) {
    for (auto& r : spec.roles) {
      if (r == JitRole::vector) r = JitRole::strided;
    }
    l.strides = st;
    l.strides.push_back(row_major_strides(shape)); // outputs, kept row-major
    for (size_t k = 0; k < inputs.size(); ++k) {
      if (spec.roles[k] != JitRole::strided)
        l.strides[k].assign(shape.size(), 0);
    }
    l.shape = collapse_dims(shape, l.strides);
    return l;
  }
  // Flat: outputs take the shared layout (all scalars: one element).
  if (layout < 0) layout = first_array;
  l.layout_input = layout;
  l.out_strides = layout >= 0 ? st[layout] : Strides(shape.size(), 0);
  if (layout < 0 || spec.roles[layout] == JitRole::scalar) {
    l.flat = layout_of(shape, l.out_strides);
    l.flat.data_size = 1;
  }
  return l;
}

bool rows_layout(CompiledLayout& l) {
  JitKernelSpec& spec = l.spec;
  if (spec.contiguous || l.shape.size() != 2) return false;
  const int64_t n = l.shape[1];
  auto role_of = [n](const Strides& st) {
    if (st[0] == n && st[1] == 1) return JitRole::vector;
    if (st[0] == 1 && st[1] == 0) return JitRole::row;
    if (st[0] == 0 && st[1] == 1) return JitRole::column;
    return JitRole::strided;
  };
  for (size_t k = 0; k < spec.roles.size(); ++k) {
    if (spec.roles[k] == JitRole::strided &&
        role_of(l.strides[k]) == JitRole::strided) {
      return false;
    }
  }
  for (size_t k = 0; k < spec.roles.size(); ++k) {
    if (spec.roles[k] == JitRole::strided)
      spec.roles[k] = role_of(l.strides[k]);
  }
  return true;
}

std::string hex_literal(uint64_t bits) {
  char buf[24];
  std::snprintf(buf, sizeof(buf), "0x%llxull",
                static_cast<unsigned long long>(bits));
  return buf;
}

} // namespace kiln::detail
