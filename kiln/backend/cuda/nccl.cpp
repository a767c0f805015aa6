// The NCCL backend: GPU arrays, one GPU per process. NCCL is opened with
// dlopen when a group is first formed (KILN_NCCL_LIBRARY, which the Python
// package points at the nvidia-nccl wheel's copy, else the system's
// libnccl.so.2), so kiln builds and loads without it. Collectives are
// queued on the caller's CUDA stream and never wait for the GPU; the
// watchdog follows each one by an event and ends the process when one
// outlives KILN_DISTRIBUTED_TIMEOUT or NCCL reports an error.
#include <cstdlib>
#include <dlfcn.h>

#include <cstring>
#include <mutex>
#include <stdexcept>
#include <string>

#include "kiln/backend/cuda/device.h"
#include "kiln/backend/cuda/utils.h"
#include "kiln/core/env.h"
#include "kiln/distributed/communicator.h"
#include "kiln/distributed/watchdog.h"

namespace kiln::distributed::detail {

namespace {

using Comm = void*; // ncclComm_t
struct UniqueId {
  char internal[128]; // ncclUniqueId
};
constexpr int kSuccess = 0;
constexpr int kInProgress = 7;
enum NcclType { i8 = 0, u8 = 1, i32 = 2, u32 = 3, i64 = 4, u64 = 5, f16 = 6,
                f32 = 7, f64 = 8, bf16 = 9 };
enum NcclOp { op_sum = 0, op_max = 2, op_min = 3 };

struct Api {
  void* lib = nullptr;
  std::string error;
  int version = 0;
  int (*GetVersion)(int*);
  int (*GetUniqueId)(UniqueId*);
  int (*CommInitRank)(Comm*, int, UniqueId, int);
  int (*CommSplit)(Comm, int, int, Comm*, void*);
  int (*CommCount)(Comm, int*);
  int (*CommUserRank)(Comm, int*);
  int (*CommGetAsyncError)(Comm, int*);
  const char* (*GetErrorString)(int);
  const char* (*GetLastError)(Comm);
  int (*AllReduce)(const void*, void*, size_t, int, int, Comm, cudaStream_t);
  int (*AllGather)(const void*, void*, size_t, int, Comm, cudaStream_t);
  int (*ReduceScatter)(const void*, void*, size_t, int, int, Comm,
                       cudaStream_t);
  int (*Send)(const void*, size_t, int, int, Comm, cudaStream_t);
  int (*Recv)(void*, size_t, int, int, Comm, cudaStream_t);
};

template <typename F>
bool resolve(Api& a, F& f, const char* name) {
  f = reinterpret_cast<F>(dlsym(a.lib, name));
  if (!f) a.error = std::string("libnccl has no ") + name;
  return f != nullptr;
}

Api& api() {
  static Api a = [] {
    Api a;
    std::string path = env::value("KILN_NCCL_LIBRARY");
    a.lib = dlopen(path.empty() ? "libnccl.so.2" : path.c_str(),
                   RTLD_NOW | RTLD_LOCAL);
    if (!a.lib) {
      const char* e = dlerror();
      a.error = std::string("NCCL did not load (") + (e ? e : "not found") +
                "; pip install nvidia-nccl-cu13 or set KILN_NCCL_LIBRARY)";
      return a;
    }
    bool ok = resolve(a, a.GetVersion, "ncclGetVersion") &&
              resolve(a, a.GetUniqueId, "ncclGetUniqueId") &&
              resolve(a, a.CommInitRank, "ncclCommInitRank") &&
              resolve(a, a.CommSplit, "ncclCommSplit") &&
              resolve(a, a.CommCount, "ncclCommCount") &&
              resolve(a, a.CommUserRank, "ncclCommUserRank") &&
              resolve(a, a.CommGetAsyncError, "ncclCommGetAsyncError") &&
              resolve(a, a.GetErrorString, "ncclGetErrorString") &&
              resolve(a, a.GetLastError, "ncclGetLastError") &&
              resolve(a, a.AllReduce, "ncclAllReduce") &&
              resolve(a, a.AllGather, "ncclAllGather") &&
              resolve(a, a.ReduceScatter, "ncclReduceScatter") &&
              resolve(a, a.Send, "ncclSend") && resolve(a, a.Recv, "ncclRecv");
    if (ok) {
      a.GetVersion(&a.version);
      // ncclCommSplit and ncclGetLastError came in 2.18.
      if (a.version < 21800) {
        a.error = "NCCL " + std::to_string(a.version) + " is older than 2.18";
        ok = false;
      }
    }
    if (!ok) {
      dlclose(a.lib);
      a.lib = nullptr;
    }
    return a;
  }();
  return a;
}

void check(int code, Comm comm, const char* what, const char* call) {
  if (code == kSuccess || code == kInProgress) return;
  std::string msg = std::string("[") + what + "] " + call +
                    " failed: " + api().GetErrorString(code);
  const char* last = comm ? api().GetLastError(comm) : nullptr;
  if (last && *last) msg += std::string(" (") + last + ")";
  throw std::runtime_error(msg);
}

class Nccl final : public Communicator {
 public:
  Nccl(Comm comm, int rank, int size) : comm_(comm), rank_(rank),
                                        size_(size) {}
  // Never destroyed at exit: NCCL may already be torn down by then.
  int rank() const override { return rank_; }
  int size() const override { return size_; }
  const char* backend() const override { return "nccl"; }
  bool on_device() const override { return true; }

  std::shared_ptr<Communicator> split(int color, int key) override {
    if (color < 0) {
      throw std::invalid_argument(
          "[distributed.split] color must be non-negative, got " +
          std::to_string(color) + ".");
    }
    cuda::set_current_device();
    Comm out = nullptr;
    Watch watch("distributed.split", rank_, size_, -1);
    check(api().CommSplit(comm_, color, key < 0 ? rank_ : key, &out, nullptr),
          comm_, "distributed.split", "ncclCommSplit");
    int rank = 0, size = 0;
    check(api().CommCount(out, &size), out, "distributed.split",
          "ncclCommCount");
    check(api().CommUserRank(out, &rank), out, "distributed.split",
          "ncclCommUserRank");
    return std::make_shared<Nccl>(out, rank, size);
  }

  void all_reduce(const void* in, void* out, size_t count, Dtype dtype,
                  ReduceOp op, const char* what, void* stream) override {
    auto [type, nop, n] = type_and_op(dtype, op, count, what);
    run(what, -1, stream, [&, type = type, nop = nop, n = n](cudaStream_t s) {
      check(api().AllReduce(in, out, n, type, nop, comm_, s), comm_, what,
            "ncclAllReduce");
    });
  }

  void all_gather(const void* in, void* out, size_t bytes, const char* what,
                  void* stream) override {
    if (stream == nullptr) {
      staged(in, bytes, out, bytes * size_, what, [&](void* i, void* o,
                                                      cudaStream_t s) {
        check(api().AllGather(i, o, bytes, u8, comm_, s), comm_, what,
              "ncclAllGather");
      });
      return;
    }
    run(what, -1, stream, [&](cudaStream_t s) {
      check(api().AllGather(in, out, bytes, u8, comm_, s), comm_, what,
            "ncclAllGather");
    });
  }

  void reduce_scatter(const void* in, void* out, size_t count, Dtype dtype,
                      ReduceOp op, const char* what, void* stream) override {
    auto [type, nop, n] = type_and_op(dtype, op, count, what);
    run(what, -1, stream, [&, type = type, nop = nop, n = n](cudaStream_t s) {
      check(api().ReduceScatter(in, out, n, type, nop, comm_, s), comm_, what,
            "ncclReduceScatter");
    });
  }

  void send(const void* buf, size_t bytes, int dst, const char* what,
            void* stream) override {
    if (stream == nullptr) {
      staged(buf, bytes, nullptr, 0, what, [&](void* i, void*,
                                                cudaStream_t s) {
        check(api().Send(i, bytes, u8, dst, comm_, s), comm_, what,
              "ncclSend");
      });
      return;
    }
    run(what, dst, stream, [&](cudaStream_t s) {
      check(api().Send(buf, bytes, u8, dst, comm_, s), comm_, what,
            "ncclSend");
    });
  }

  void recv(void* buf, size_t bytes, int src, const char* what,
            void* stream) override {
    if (stream == nullptr) {
      staged(nullptr, 0, buf, bytes, what, [&](void*, void* o,
                                               cudaStream_t s) {
        check(api().Recv(o, bytes, u8, src, comm_, s), comm_, what,
              "ncclRecv");
      });
      return;
    }
    run(what, src, stream, [&](cudaStream_t s) {
      check(api().Recv(buf, bytes, u8, src, comm_, s), comm_, what,
            "ncclRecv");
    });
  }

 private:
  struct Typed {
    int type, op;
    size_t count;
  };

  // The ops normalize what NCCL lacks before the graph reaches here
  // (16-bit integers travel as int32, complex max/min raise): reaching
  // the throw is a bug.
  Typed type_and_op(Dtype dtype, ReduceOp op, size_t count,
                    const char* what) {
    int ops[3] = {op_sum, op_max, op_min};
    int o = ops[static_cast<int>(op)];
    switch (dtype.val) {
      case Dtype::Val::bool_: // or, or, and
        return {u8, op == ReduceOp::min ? op_min : op_max, count};
      case Dtype::Val::int8: return {i8, o, count};
      case Dtype::Val::uint8: return {u8, o, count};
      case Dtype::Val::int32: return {i32, o, count};
      case Dtype::Val::uint32: return {u32, o, count};
      case Dtype::Val::int64: return {i64, o, count};
      case Dtype::Val::uint64: return {u64, o, count};
      case Dtype::Val::float16: return {f16, o, count};
      case Dtype::Val::bfloat16: return {bf16, o, count};
      case Dtype::Val::float32: return {f32, o, count};
      case Dtype::Val::float64: return {f64, o, count};
      case Dtype::Val::complex64:
        if (op == ReduceOp::sum) return {f32, op_sum, 2 * count};
        break;
      default: break;
    }
    throw std::logic_error(std::string("[") + what + "] NCCL has no " +
                           dtype_name(dtype) + " reduction.");
  }

  // Queues one call on the stream and hands the watchdog an event recorded
  // after it.
  template <typename F>
  void run(const char* what, int peer, void* stream, F&& call) {
    cuda::set_current_device();
    auto s = static_cast<cudaStream_t>(stream);
    call(s);
    cudaEvent_t done = cuda::acquire_event();
    KILN_CHECK_CUDA(cudaEventRecord(done, s));
    Comm comm = comm_;
    watch_queued(what, rank_, size_, peer, [done, comm](std::string& error) {
      cudaError_t e = cudaEventQuery(done);
      if (e == cudaSuccess) {
        cuda::release_event(done);
        return 1;
      }
      int async = kSuccess;
      api().CommGetAsyncError(comm, &async);
      if (async != kSuccess && async != kInProgress) {
        error = std::string("NCCL failed: ") + api().GetErrorString(async);
        return -1;
      }
      if (e != cudaErrorNotReady) {
        error = std::string("CUDA failed: ") + cudaGetErrorString(e);
        return -1;
      }
      return 0;
    });
  }

  // Host buffers (the shape checks): through device scratch on a private
  // stream, waited for under a blocking watch.
  template <typename F>
  void staged(const void* in, size_t in_bytes, void* out, size_t out_bytes,
              const char* what, F&& call) {
    cuda::set_current_device();
    std::lock_guard<std::mutex> lock(staging_mutex_);
    if (staging_stream_ == nullptr) {
      KILN_CHECK_CUDA(cudaStreamCreateWithFlags(&staging_stream_,
                                                cudaStreamNonBlocking));
    }
    void *din = nullptr, *dout = nullptr;
    KILN_CHECK_CUDA(cudaMallocAsync(&din, in_bytes + 1, staging_stream_));
    KILN_CHECK_CUDA(cudaMallocAsync(&dout, out_bytes + 1, staging_stream_));
    if (in_bytes) {
      KILN_CHECK_CUDA(cudaMemcpyAsync(din, in, in_bytes,
                                      cudaMemcpyHostToDevice,
                                      staging_stream_));
    }
    call(din, dout, staging_stream_);
    if (out_bytes) {
      KILN_CHECK_CUDA(cudaMemcpyAsync(out, dout, out_bytes,
                                      cudaMemcpyDeviceToHost,
                                      staging_stream_));
    }
    KILN_CHECK_CUDA(cudaFreeAsync(din, staging_stream_));
    KILN_CHECK_CUDA(cudaFreeAsync(dout, staging_stream_));
    Watch watch(what, rank_, size_, -1);
    KILN_CHECK_CUDA(cudaStreamSynchronize(staging_stream_));
  }

  Comm comm_;
  int rank_, size_;
  std::mutex staging_mutex_;
  cudaStream_t staging_stream_ = nullptr;
};

} // namespace

bool nccl_library_loads() {
  return api().lib != nullptr && cuda::device_count() > 0;
}

std::shared_ptr<Communicator> nccl_communicator(std::string& why) {
  auto& a = api();
  if (!a.lib) {
    why = a.error;
    return nullptr;
  }
  if (cuda::device_count() == 0) {
    why = "this machine has no GPU";
    return nullptr;
  }
  auto [rank, size] = launched_rank();
  if (rank < 0) {
    why = "this process was not started by python -m kiln.launch or mpirun";
    return nullptr;
  }
  // NCCL takes one GPU per process: more local processes than GPUs (and
  // no KILN_DEVICE naming distinct ones) cannot form a group.
  int local_size = 0;
  for (const char* name :
       {"KILN_LOCAL_WORLD_SIZE", "OMPI_COMM_WORLD_LOCAL_SIZE"}) {
    const char* v = std::getenv(name);
    if (v && *v && !local_size) local_size = std::atoi(v);
  }
  if (local_size > cuda::device_count() && !std::getenv("KILN_DEVICE")) {
    why = std::to_string(local_size) + " processes on this machine share " +
          std::to_string(cuda::device_count()) +
          " GPU(s), and NCCL needs one GPU per process";
    return nullptr;
  }
  static std::mutex m;
  static std::shared_ptr<Communicator> world;
  std::lock_guard<std::mutex> lock(m);
  if (world) return world;
  cuda::device_info(); // picks this process's GPU and makes it current
  UniqueId id{};
  if (rank == 0) check(a.GetUniqueId(&id), nullptr, "distributed.init",
                       "ncclGetUniqueId");
  broadcast_from_root(&id, sizeof id, rank, size);
  Comm comm = nullptr;
  {
    Watch watch("distributed.init", rank, size, -1);
    check(a.CommInitRank(&comm, size, id, rank), nullptr, "distributed.init",
          "ncclCommInitRank");
  }
  world = std::make_shared<Nccl>(comm, rank, size);
  return world;
}

} // namespace kiln::distributed::detail
