#include "kiln/backend/cuda/cufft.h"

#include <cufft.h>

#include <cstdlib>
#include <list>
#include <mutex>
#include <stdexcept>
#include <string>
#include <tuple>
#include <vector>

#include "kiln/backend/cuda/buffer.h"
#include "kiln/backend/cuda/device.h"
#include "kiln/backend/cuda/toolkit_library.h"

namespace kiln::cuda::cufft {

namespace {

// The entry points kiln uses, resolved from the loaded library.
struct Api {
  decltype(&cufftCreate) create = nullptr;
  decltype(&cufftDestroy) destroy = nullptr;
  decltype(&cufftSetAutoAllocation) set_auto_allocation = nullptr;
  decltype(&cufftMakePlanMany64) make_plan_many = nullptr;
  decltype(&cufftSetWorkArea) set_work_area = nullptr;
  decltype(&cufftSetStream) set_stream = nullptr;
  decltype(&cufftExecC2C) exec_c2c = nullptr;
  decltype(&cufftExecR2C) exec_r2c = nullptr;
  decltype(&cufftExecC2R) exec_c2r = nullptr;
};

// Null when no library loads or one lacks an entry point.
const Api* api() {
  static const Api* loaded = []() -> const Api* {
    static Api a;
    void* lib = open_toolkit_library(
        "KILN_CUFFT_LIBRARY", {"libcufft.so.12", "libcufft.so.11"},
        [](void* lib) {
          return resolve(lib, "cufftCreate", a.create) &&
                 resolve(lib, "cufftDestroy", a.destroy) &&
                 resolve(lib, "cufftSetAutoAllocation",
                         a.set_auto_allocation) &&
                 resolve(lib, "cufftMakePlanMany64", a.make_plan_many) &&
                 resolve(lib, "cufftSetWorkArea", a.set_work_area) &&
                 resolve(lib, "cufftSetStream", a.set_stream) &&
                 resolve(lib, "cufftExecC2C", a.exec_c2c) &&
                 resolve(lib, "cufftExecR2C", a.exec_r2c) &&
                 resolve(lib, "cufftExecC2R", a.exec_c2r);
        });
    return lib ? &a : nullptr;
  }();
  return loaded;
}

void check(cufftResult r, const char* what, const Layout& l) {
  if (r == CUFFT_SUCCESS) return;
  std::string dims;
  for (int i = 0; i < l.rank; ++i) {
    dims += (i ? "x" : "") + std::to_string(l.dims[i]);
  }
  throw std::runtime_error(std::string("[fft] cuFFT ") + what + " failed (" +
                           "status " + std::to_string(static_cast<int>(r)) +
                           ") for " + std::to_string(l.batch) +
                           " transforms of " + dims + " points");
}

struct Plan {
  cufftHandle handle = 0;
  size_t work_bytes = 0;
};

// kiln uses one GPU (device.h), so a plan is known by its layout.
using Key =
    std::tuple<int, int, int64_t, int64_t, int64_t, int64_t, int64_t, bool>;

Key key_of(const Layout& l) {
  return {static_cast<int>(l.kind), l.rank, l.rank > 0 ? l.dims[0] : 0,
          l.rank > 1 ? l.dims[1] : 0, l.rank > 2 ? l.dims[2] : 0, l.batch,
          l.stride, l.packed_output};
}

// The most recently used plans (a plan holds device memory for its
// twiddles; a work area it borrows per call).
constexpr size_t plan_capacity = 32;

Plan make_plan(const Api& a, const Layout& l) {
  long long n[3], in_embed[3], out_embed[3];
  long long points = 1, half_points = 1;
  for (int i = 0; i < l.rank; ++i) {
    n[i] = in_embed[i] = out_embed[i] = l.dims[i];
    points *= l.dims[i];
  }
  long long last_half = l.dims[l.rank - 1] / 2 + 1;
  half_points = points / l.dims[l.rank - 1] * last_half;
  long long in_dist = points, out_dist = points, stride = l.stride;
  long long out_stride = l.packed_output ? 1 : stride;
  cufftType type = CUFFT_C2C;
  if (l.kind == Kind::r2c) {
    type = CUFFT_R2C;
    out_embed[l.rank - 1] = last_half;
    out_dist = half_points;
  } else if (l.kind == Kind::c2r) {
    type = CUFFT_C2R;
    in_embed[l.rank - 1] = last_half;
    in_dist = half_points;
  }
  if (stride > 1) in_dist = 1;
  if (out_stride > 1) out_dist = 1;
  Plan p;
  check(a.create(&p.handle), "plan creation", l);
  cufftResult r = a.set_auto_allocation(p.handle, 0);
  if (r == CUFFT_SUCCESS) {
    // Packed transforms take cuFFT's basic layout (no embeddings), which is
    // theirs, as PyTorch's do: with the embeddings spelled out, cuFFT chose
    // slower kernels for a 4096 x 4096 rfft2 (87 us against 68 for the
    // same first pass).
    bool basic = stride == 1 && out_stride == 1;
    r = a.make_plan_many(p.handle, l.rank, n, basic ? nullptr : in_embed,
                         stride, in_dist, basic ? nullptr : out_embed,
                         out_stride, out_dist, type, l.batch, &p.work_bytes);
  }
  if (r != CUFFT_SUCCESS) {
    a.destroy(p.handle);
    check(r, "planning", l);
  }
  return p;
}

} // namespace

bool available() { return api() != nullptr; }

void execute(const Layout& l, void* in, void* out, bool inverse,
             const Stream& s) {
  const Api* a = api();
  if (!a) throw std::runtime_error("[fft] cuFFT is not available");
  // One plan serves one call at a time: the stream and work area are set
  // per call, under the lock.
  static std::mutex m;
  static std::list<std::pair<Key, Plan>> plans;
  std::lock_guard<std::mutex> lock(m);
  set_current_device();
  Key key = key_of(l);
  auto it = plans.begin();
  while (it != plans.end() && it->first != key) ++it;
  if (it != plans.end()) {
    plans.splice(plans.begin(), plans, it);
  } else {
    plans.emplace_front(key, make_plan(*a, l));
    if (plans.size() > plan_capacity) {
      a->destroy(plans.back().second.handle);
      plans.pop_back();
    }
  }
  Plan& p = plans.front().second;
  // Like cuBLASLt's workspace (gemm.cpp): back to the allocator at once,
  // which hands it out again only behind this stream's work.
  void* work = p.work_bytes ? device_malloc(p.work_bytes, s.index) : nullptr;
  cufftResult r = a->set_stream(p.handle, cuda_stream(s));
  if (r == CUFFT_SUCCESS && work) r = a->set_work_area(p.handle, work);
  if (r == CUFFT_SUCCESS) {
    switch (l.kind) {
      case Kind::c2c:
        r = a->exec_c2c(p.handle, static_cast<cufftComplex*>(in),
                        static_cast<cufftComplex*>(out),
                        inverse ? CUFFT_INVERSE : CUFFT_FORWARD);
        break;
      case Kind::r2c:
        r = a->exec_r2c(p.handle, static_cast<cufftReal*>(in),
                        static_cast<cufftComplex*>(out));
        break;
      case Kind::c2r:
        r = a->exec_c2r(p.handle, static_cast<cufftComplex*>(in),
                        static_cast<cufftReal*>(out));
        break;
    }
  }
  if (work) device_free(work, stream_bit(s));
  check(r, "execution", l);
}

} // namespace kiln::cuda::cufft
