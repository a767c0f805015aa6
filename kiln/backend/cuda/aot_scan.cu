// Ahead-of-time scans: cumsum and cumprod on the float types, int32 and
// int64 (bool counting into int32), cummax and cummin on float32 and int32,
// logcumsumexp on float32, each in its three patterns. Everything else is
// compiled by NVRTC at first use.
#include "kiln/backend/cuda/aot.cuh"
#include "kiln/backend/cuda/axis_kernels.h"
#include "kiln/backend/cuda/device/scan.cuh"

namespace kiln::cuda {

namespace {

template <typename Op, typename In, typename Out>
void scans(AotTable& t, const char* op) {
  using namespace aot;
  Dtype i = dtype_v<In>, o = dtype_v<Out>;
  constexpr Tile s = short_scan_tile, r = long_scan_tile(sizeof(In));
  put(t, scan_kernel(op, i, o, 's'),
      reinterpret_cast<const void*>(
          &scan_lines<Op, In, Out, s.threads, s.items>));
  put(t, scan_kernel(op, i, o, 'r'),
      reinterpret_cast<const void*>(
          &scan_lines<Op, In, Out, r.threads, r.items>));
  put(t, scan_kernel(op, i, o, 'c'),
      reinterpret_cast<const void*>(&scan_columns<Op, In, Out>));
  put(t, scan_kernel(op, i, o, 't'),
      reinterpret_cast<const void*>(
          &scan_chunk_totals<Op, In, Out, r.threads>));
  put(t, scan_kernel(op, i, o, 'k'),
      reinterpret_cast<const void*>(
          &scan_chunks<Op, In, Out, r.threads, r.items>));
}

template <typename T>
void sums_and_products(AotTable& t) {
  scans<Add, T, T>(t, "Add");
  scans<Multiply, T, T>(t, "Multiply");
}

} // namespace

void add_aot_scan(AotTable& t) {
  sums_and_products<float>(t);
  sums_and_products<__half>(t);
  sums_and_products<__nv_bfloat16>(t);
  sums_and_products<int32_t>(t);
  sums_and_products<int64_t>(t);
  scans<Add, bool, int32_t>(t, "Add");
  scans<Maximum, float, float>(t, "Maximum");
  scans<Minimum, float, float>(t, "Minimum");
  scans<Maximum, int32_t, int32_t>(t, "Maximum");
  scans<Minimum, int32_t, int32_t>(t, "Minimum");
  scans<LogAddExp, float, float>(t, "LogAddExp");
}

} // namespace kiln::cuda
