#include "kiln/backend/cuda/addresses.h"

#include <string>
#include <utility>

#include "kiln/backend/cuda/kernels.h"

namespace kiln::cuda {

namespace {

JitKernel addresses_kernel(std::string name, std::string expression) {
  return {std::move(name),
          "#include \"kiln/backend/cuda/device/addresses.cuh\"\n",
          std::move(expression),
          {}};
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

JitKernel picked_matrices_kernel(size_t itemsize) {
  const char* word = itemsize == 2   ? "unsigned short"
                     : itemsize == 4 ? "unsigned int"
                                     : "unsigned long long";
  return addresses_kernel("gPickedMatrices" + std::to_string(itemsize),
                          std::string("kiln::cuda::picked_matrices<") + word +
                              ">");
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

void picked_matrices(const void* a, const void* lhs, int64_t na,
                     int64_t stride, int64_t sr, int64_t sc, int64_t m,
                     int64_t k, int64_t picks, size_t itemsize, void* out,
                     const Stream& s) {
  KernelKey key('g', "PickedMatrices");
  key.add(static_cast<uint32_t>(itemsize));
  CUfunction f =
      find_kernel(key, [&] { return picked_matrices_kernel(itemsize); });
  int64_t total = picks * m * k;
  void* args[] = {&a, &lhs, &na, &stride, &sr, &sc, &m, &k, &total, &out};
  launch(f, total, 1, args, s.index);
}

} // namespace kiln::cuda
