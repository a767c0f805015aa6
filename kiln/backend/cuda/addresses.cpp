#include "kiln/backend/cuda/addresses.h"

#include "kiln/backend/cuda/kernels.h"

namespace kiln::cuda {

namespace {

JitKernel addresses_kernel(const char* name, const char* expression) {
  return {name, "#include \"kiln/backend/cuda/device/addresses.cuh\"\n",
          expression, {}};
}

} // namespace

JitKernel strided_addresses_kernel() {
  return addresses_kernel("gStridedAddresses",
                          "kiln::cuda::strided_addresses<char>");
}

JitKernel gather_mm_addresses_kernel() {
  return addresses_kernel("gGatherMMAddresses",
                          "kiln::cuda::gather_mm_addresses<unsigned int>");
}

void strided_addresses(Scratch& list, void* base, int64_t count,
                       size_t stride, const Stream& s) {
  CUfunction f = find_kernel(KernelKey('g', "StridedAddresses"),
                             [] { return strided_addresses_kernel(); });
  auto* p = static_cast<char*>(base);
  int64_t st = static_cast<int64_t>(stride);
  void* out = list.ptr;
  void* args[] = {&p, &st, &count, &out};
  launch(f, count, 1, args, s.index);
  // A library routine reads the list next, on a stream it may have taken
  // (and so flushed) before this kernel was recorded for a graph.
  flush_launches(s.index);
}

void gather_mm_addresses(Scratch& list, const void* lhs, const void* rhs,
                         const void* a, const void* b, void* c, int64_t na,
                         int64_t nb, int64_t a_stride, int64_t b_stride,
                         int64_t c_stride, int64_t picks, const Stream& s) {
  CUfunction f = find_kernel(KernelKey('g', "GatherMMAddresses"),
                             [] { return gather_mm_addresses_kernel(); });
  auto** a_out = static_cast<void**>(list.ptr);
  void** b_out = a_out + picks;
  void** c_out = b_out + picks;
  void* args[] = {&lhs,      &rhs,   &a,     &b,     &c,
                  &na,       &nb,    &a_stride, &b_stride, &c_stride,
                  &picks,    &a_out, &b_out, &c_out};
  launch(f, picks, 1, args, s.index);
  flush_launches(s.index);
}

} // namespace kiln::cuda
