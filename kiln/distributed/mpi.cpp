// The MPI backend: OpenMPI, opened with dlopen when a group is first formed,
// so kiln builds and loads without it. MPI handles are OpenMPI's (pointers
// to its predefined objects, found by name), so no MPI header is needed to
// build. Calls are OpenMPI's blocking ones (its nonblocking collectives
// take another, slower path: 2x the time up to 1 MB); a watchdog ends a
// process whose peer never arrives, so a lost peer is an error naming the
// op, never a hang.
#include <dlfcn.h>

#include <algorithm>
#include <climits>
#include <cstddef>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <stdexcept>
#include <type_traits>

#include "kiln/core/dispatch.h"
#include "kiln/core/env.h"
#include "kiln/core/half.h"
#include "kiln/distributed/communicator.h"
#include "kiln/distributed/watchdog.h"

namespace kiln::distributed::detail {

namespace {

using Handle = void*; // MPI_Comm, MPI_Datatype, MPI_Op, MPI_Request, ...
using UserFn = void(void* in, void* inout, int* len, Handle* type);
constexpr int kSuccess = 0;
constexpr int kThreadSerialized = 2;
constexpr int kUndefinedColor = -32766; // MPI_UNDEFINED in OpenMPI
void* const kInPlace = reinterpret_cast<void*>(1);  // MPI_IN_PLACE
void* const kStatusIgnore = nullptr;                // MPI_STATUS_IGNORE

struct Api {
  void* lib = nullptr;
  std::string error;
  int (*Init_thread)(int*, char***, int, int*);
  int (*Initialized)(int*);
  int (*Finalized)(int*);
  int (*Finalize)();
  int (*Abort)(Handle, int);
  int (*Comm_rank)(Handle, int*);
  int (*Comm_size)(Handle, int*);
  int (*Comm_split)(Handle, int, int, Handle*);
  int (*Comm_set_errhandler)(Handle, Handle);
  int (*Allreduce)(const void*, void*, int, Handle, Handle, Handle);
  int (*Allgather)(const void*, int, Handle, void*, int, Handle, Handle);
  int (*Reduce_scatter_block)(const void*, void*, int, Handle, Handle,
                              Handle);
  int (*Send)(const void*, int, Handle, int, int, Handle);
  int (*Recv)(void*, int, Handle, int, int, Handle, void*);
  int (*Error_string)(int, char*, int*);
  int (*Type_contiguous)(int, Handle, Handle*);
  int (*Type_commit)(Handle*);
  int (*Op_create)(UserFn*, int, Handle*);
  Handle comm_world, errors_return, byte, c_bool, i8, u8, i16, u16, i32, u32,
      i64, u64, f32, f64, c64, op_sum, op_max, op_min, op_lor, op_land;
  // float16 and bfloat16 travel as 2-byte types with kiln's own reductions.
  Handle half_type = nullptr;
  Handle f16_ops[3] = {}, bf16_ops[3] = {};
  // complex64 orders by real part, then imaginary part (as kiln's max).
  Handle c64_ops[3] = {};
  // Sums of 8- and 16-bit integers wrap, as kiln's sums do; OpenMPI 4.1's
  // vectorized MPI_SUM saturates them.
  Handle wrapping_sum[4] = {}; // int8, uint8, int16, uint16
  // float32 and float64 max and min propagate NaN, as kiln's maximum does
  // (MPI_MAX keeps a NaN or not depending on the order it meets it).
  Handle f32_ops[3] = {}, f64_ops[3] = {};
  // all_reduce_agreeing's message (a Fused) and its reduction.
  Handle fused_type = nullptr, fused_op = nullptr;
};

template <typename F>
bool resolve(Api& a, F& f, const char* name) {
  f = reinterpret_cast<F>(dlsym(a.lib, name));
  if (!f) a.error = std::string("libmpi has no ") + name;
  return f != nullptr;
}

bool handle(Api& a, Handle& h, const char* name) {
  h = dlsym(a.lib, name);
  if (!h) a.error = std::string("libmpi has no ") + name;
  return h != nullptr;
}

Api& api() {
  static Api a = [] {
    Api a;
    std::string path = env::value("KILN_MPI_LIBRARY");
    for (const char* name : {"libmpi.so.40", "libmpi.so"}) {
      const char* p = path.empty() ? name : path.c_str();
      // Global: OpenMPI's plugins resolve their symbols against libmpi.
      a.lib = dlopen(p, RTLD_NOW | RTLD_GLOBAL);
      if (a.lib || !path.empty()) break;
    }
    if (!a.lib) {
      const char* e = dlerror();
      a.error = std::string("OpenMPI's libmpi did not load (") +
                (e ? e : "not found") + "; install libopenmpi-dev or set "
                "KILN_MPI_LIBRARY)";
      return a;
    }
    bool ok = resolve(a, a.Init_thread, "MPI_Init_thread") &&
              resolve(a, a.Initialized, "MPI_Initialized") &&
              resolve(a, a.Finalized, "MPI_Finalized") &&
              resolve(a, a.Finalize, "MPI_Finalize") &&
              resolve(a, a.Abort, "MPI_Abort") &&
              resolve(a, a.Comm_rank, "MPI_Comm_rank") &&
              resolve(a, a.Comm_size, "MPI_Comm_size") &&
              resolve(a, a.Comm_split, "MPI_Comm_split") &&
              resolve(a, a.Comm_set_errhandler, "MPI_Comm_set_errhandler") &&
              resolve(a, a.Allreduce, "MPI_Allreduce") &&
              resolve(a, a.Allgather, "MPI_Allgather") &&
              resolve(a, a.Reduce_scatter_block,
                      "MPI_Reduce_scatter_block") &&
              resolve(a, a.Send, "MPI_Send") &&
              resolve(a, a.Recv, "MPI_Recv") &&
              resolve(a, a.Error_string, "MPI_Error_string") &&
              resolve(a, a.Type_contiguous, "MPI_Type_contiguous") &&
              resolve(a, a.Type_commit, "MPI_Type_commit") &&
              resolve(a, a.Op_create, "MPI_Op_create") &&
              handle(a, a.comm_world, "ompi_mpi_comm_world") &&
              handle(a, a.errors_return, "ompi_mpi_errors_return") &&
              handle(a, a.byte, "ompi_mpi_byte") &&
              handle(a, a.c_bool, "ompi_mpi_c_bool") &&
              handle(a, a.i8, "ompi_mpi_int8_t") &&
              handle(a, a.u8, "ompi_mpi_uint8_t") &&
              handle(a, a.i16, "ompi_mpi_int16_t") &&
              handle(a, a.u16, "ompi_mpi_uint16_t") &&
              handle(a, a.i32, "ompi_mpi_int32_t") &&
              handle(a, a.u32, "ompi_mpi_uint32_t") &&
              handle(a, a.i64, "ompi_mpi_int64_t") &&
              handle(a, a.u64, "ompi_mpi_uint64_t") &&
              handle(a, a.f32, "ompi_mpi_float") &&
              handle(a, a.f64, "ompi_mpi_double") &&
              handle(a, a.c64, "ompi_mpi_c_float_complex") &&
              handle(a, a.op_sum, "ompi_mpi_op_sum") &&
              handle(a, a.op_max, "ompi_mpi_op_max") &&
              handle(a, a.op_min, "ompi_mpi_op_min") &&
              handle(a, a.op_lor, "ompi_mpi_op_lor") &&
              handle(a, a.op_land, "ompi_mpi_op_land");
    if (!ok) {
      dlclose(a.lib);
      a.lib = nullptr;
    }
    return a;
  }();
  return a;
}

template <ReduceOp op>
void reduce_complex(void* in, void* inout, int* len, Handle*) {
  auto* a = static_cast<const float*>(in);
  auto* b = static_cast<float*>(inout);
  for (int i = 0; i < *len; ++i) {
    float ar = a[2 * i], ai = a[2 * i + 1], br = b[2 * i], bi = b[2 * i + 1];
    bool a_nan = ar != ar || ai != ai;
    bool a_less = ar < br || (ar == br && ai < bi);
    bool take_a =
        a_nan ||
        (op == ReduceOp::max ? !a_less && !(ar == br && ai == bi) : a_less);
    if (take_a) {
      b[2 * i] = ar;
      b[2 * i + 1] = ai;
    }
  }
}

template <typename T>
void reduce_values(const T* a, T* b, size_t n, ReduceOp op) {
  using C = compute_t<T>;
  for (size_t i = 0; i < n; ++i) {
    C x = static_cast<C>(a[i]), y = static_cast<C>(b[i]);
    if constexpr (std::is_same_v<T, bool>) {
      b[i] = op == ReduceOp::min ? (x && y) : (x || y);
    } else if (op == ReduceOp::sum) {
      b[i] = static_cast<T>(x + y);
    } else if constexpr (std::is_floating_point_v<C>) {
      b[i] = static_cast<T>(op == ReduceOp::max ? (x > y || x != x ? x : y)
                                                : (x < y || x != x ? x : y));
    } else {
      b[i] = op == ReduceOp::max ? std::max(x, y) : std::min(x, y);
    }
  }
}

template <typename T, ReduceOp op>
void reduce_as_kiln(void* in, void* inout, int* len, Handle*) {
  reduce_values(static_cast<const T*>(in), static_cast<T*>(inout),
                static_cast<size_t>(*len), op);
}

// kiln's max and min for T as MPI ops (ops[1], ops[2]), and its sum
// (ops[0]) where MPI's own differs.
template <typename T>
void kiln_ops(Api& a, Handle (&ops)[3], bool with_sum) {
  if (with_sum) a.Op_create(&reduce_as_kiln<T, ReduceOp::sum>, 1, &ops[0]);
  a.Op_create(&reduce_as_kiln<T, ReduceOp::max>, 1, &ops[1]);
  a.Op_create(&reduce_as_kiln<T, ReduceOp::min>, 1, &ops[2]);
}

// The reductions of all_reduce over host memory, as MPI and kiln's own MPI
// ops compute them: "or" and "and" for bool, NaN-propagating max and min.
void reduce_host(const void* in, void* inout, size_t n, Dtype dtype,
                 ReduceOp op) {
  if (dtype == complex64) {
    int len = static_cast<int>(n);
    if (op == ReduceOp::sum) {
      reduce_values(static_cast<const float*>(in), static_cast<float*>(inout),
                    2 * n, op);
    } else if (op == ReduceOp::max) {
      reduce_complex<ReduceOp::max>(const_cast<void*>(in), inout, &len,
                                    nullptr);
    } else {
      reduce_complex<ReduceOp::min>(const_cast<void*>(in), inout, &len,
                                    nullptr);
    }
    return;
  }
  dispatch_real_type(dtype, "distributed", [&](auto tag) {
    using T = KILN_TYPE(tag);
    reduce_values(static_cast<const T*>(in), static_cast<T*>(inout), n, op);
  });
}

// all_reduce_agreeing's message: the same size on every process whatever
// the array, so it is always a valid collective. Signatures that differ
// make it "differ" and reduce nothing; otherwise a payload of up to
// kFusedPayload bytes is reduced with it.
constexpr size_t kFusedPayload = 1024;
constexpr size_t kFusedSignature = 128;
struct Fused {
  char signature[kFusedSignature];
  uint64_t signature_bytes, count;
  int32_t dtype, op, differ, carried;
  alignas(16) char payload[kFusedPayload];
};

void reduce_fused(void* in, void* inout, int* len, Handle*) {
  for (int i = 0; i < *len; ++i) {
    auto& a = static_cast<const Fused*>(in)[i];
    auto& b = static_cast<Fused*>(inout)[i];
    b.differ = a.differ || b.differ ||
               a.signature_bytes != b.signature_bytes ||
               std::memcmp(a.signature, b.signature, kFusedSignature) != 0;
    if (b.differ || !b.carried) continue;
    reduce_host(a.payload, b.payload, b.count, Dtype{
        static_cast<Dtype::Val>(b.dtype), 0}, static_cast<ReduceOp>(b.op));
  }
}

std::string mpi_error(int code) {
  char buf[512];
  int len = 0;
  if (api().Error_string(code, buf, &len) != kSuccess) return "MPI error";
  return std::string(buf, len);
}

void check(int code, const char* what, const char* call) {
  if (code != kSuccess) {
    throw std::runtime_error(std::string("[") + what + "] " + call +
                             " failed: " + mpi_error(code));
  }
}

int checked_count(size_t n, const char* what) {
  if (n > static_cast<size_t>(INT_MAX)) {
    throw std::invalid_argument(
        std::string("[") + what + "] " + std::to_string(n) +
        " elements in one transfer is more than MPI's counts hold (2^31 - 1).");
  }
  return static_cast<int>(n);
}

void finalize_at_exit() {
  auto& a = api();
  int done = 0;
  if (a.Finalized(&done) == kSuccess && !done) a.Finalize();
}

class Mpi final : public Communicator {
 public:
  explicit Mpi(Handle comm) : comm_(comm) {
    auto& a = api();
    check(a.Comm_rank(comm, &rank_), "distributed", "MPI_Comm_rank");
    check(a.Comm_size(comm, &size_), "distributed", "MPI_Comm_size");
  }
  int rank() const override { return rank_; }
  int size() const override { return size_; }
  const char* backend() const override { return "mpi"; }

  std::shared_ptr<Communicator> split(int color, int key) override {
    if (color < 0) {
      throw std::invalid_argument(
          "[distributed.split] color must be non-negative, got " +
          std::to_string(color) + ".");
    }
    Handle out = nullptr;
    check(api().Comm_split(comm_, color, key < 0 ? rank_ : key, &out),
          "distributed.split", "MPI_Comm_split");
    api().Comm_set_errhandler(out, api().errors_return);
    return std::make_shared<Mpi>(out);
  }

  void all_reduce(const void* in, void* out, size_t count, Dtype dtype,
                  ReduceOp op, const char* what, void*) override {
    auto [type, mop] = type_and_op(dtype, op, what);
    // Counts are int: a larger array goes in pieces.
    constexpr size_t piece = size_t(1) << 30;
    size_t done = 0;
    bool in_place = in == out;
    do { // once for an empty array: every process must take part
      size_t n = std::min(piece, count - done);
      size_t off = done * dtype.size;
      Watch watch(what, rank_, size_, -1);
      check(api().Allreduce(
                in_place ? kInPlace : static_cast<const char*>(in) + off,
                static_cast<char*>(out) + off, static_cast<int>(n), type, mop,
                comm_),
            what, "MPI_Allreduce");
      done += n;
    } while (done < count);
  }

  size_t agreeing_payload() const override {
    return api().fused_op ? kFusedPayload : 0;
  }

  Agreement all_reduce_agreeing(const void* signature, size_t bytes,
                                const void* in, void* out, size_t count,
                                Dtype dtype, ReduceOp op,
                                const char* what) override {
    if (bytes > kFusedSignature || !api().fused_op) {
      return Agreement::unsupported;
    }
    Fused f;
    std::memset(&f, 0, offsetof(Fused, payload));
    std::memcpy(f.signature, signature, bytes);
    f.signature_bytes = bytes;
    f.count = count;
    f.dtype = static_cast<int32_t>(dtype.val);
    f.op = static_cast<int32_t>(op);
    size_t nbytes = count * dtype.size;
    f.carried = nbytes <= kFusedPayload;
    if (f.carried) std::memcpy(f.payload, in, nbytes);
    {
      Watch watch(what, rank_, size_, -1);
      check(api().Allreduce(kInPlace, &f, 1, api().fused_type,
                            api().fused_op, comm_),
            what, "MPI_Allreduce");
    }
    if (f.differ) return Agreement::differ;
    if (!f.carried) return Agreement::agreed;
    std::memcpy(out, f.payload, nbytes);
    return Agreement::reduced;
  }

  void all_gather(const void* in, void* out, size_t bytes, const char* what,
                  void*) override {
    int n = checked_count(bytes, what);
    Watch watch(what, rank_, size_, -1);
    check(api().Allgather(in, n, api().byte, out, n, api().byte, comm_), what,
          "MPI_Allgather");
  }

  void reduce_scatter(const void* in, void* out, size_t count, Dtype dtype,
                      ReduceOp op, const char* what, void*) override {
    auto [type, mop] = type_and_op(dtype, op, what);
    Watch watch(what, rank_, size_, -1);
    check(api().Reduce_scatter_block(in, out, checked_count(count, what), type,
                                     mop, comm_),
          what, "MPI_Reduce_scatter_block");
  }

  void send(const void* buf, size_t bytes, int dst, const char* what,
            void*) override {
    int n = checked_count(bytes, what);
    Watch watch(what, rank_, size_, dst);
    check(api().Send(buf, n, api().byte, dst, 0, comm_), what, "MPI_Send");
  }

  void recv(void* buf, size_t bytes, int src, const char* what,
            void*) override {
    int n = checked_count(bytes, what);
    Watch watch(what, rank_, size_, src);
    check(api().Recv(buf, n, api().byte, src, 0, comm_, kStatusIgnore), what,
          "MPI_Recv");
  }

 private:
  std::pair<Handle, Handle> type_and_op(Dtype dtype, ReduceOp op,
                                        const char* what) {
    auto& a = api();
    int i = static_cast<int>(op);
    Handle ops[3] = {a.op_sum, a.op_max, a.op_min};
    switch (dtype.val) {
      case Dtype::Val::bool_: {
        // A sum of booleans as booleans is their "or".
        Handle bool_ops[3] = {a.op_lor, a.op_lor, a.op_land};
        return {a.c_bool, bool_ops[i]};
      }
      case Dtype::Val::int8: return {a.i8, i ? ops[i] : a.wrapping_sum[0]};
      case Dtype::Val::uint8: return {a.u8, i ? ops[i] : a.wrapping_sum[1]};
      case Dtype::Val::int16: return {a.i16, i ? ops[i] : a.wrapping_sum[2]};
      case Dtype::Val::uint16:
        return {a.u16, i ? ops[i] : a.wrapping_sum[3]};
      case Dtype::Val::int32: return {a.i32, ops[i]};
      case Dtype::Val::uint32: return {a.u32, ops[i]};
      case Dtype::Val::int64: return {a.i64, ops[i]};
      case Dtype::Val::uint64: return {a.u64, ops[i]};
      case Dtype::Val::float32: return {a.f32, i ? a.f32_ops[i] : ops[i]};
      case Dtype::Val::float64: return {a.f64, i ? a.f64_ops[i] : ops[i]};
      case Dtype::Val::float16: return {a.half_type, a.f16_ops[i]};
      case Dtype::Val::bfloat16: return {a.half_type, a.bf16_ops[i]};
      case Dtype::Val::complex64:
        if (op == ReduceOp::sum) return {a.c64, a.op_sum};
        return {a.c64, a.c64_ops[i]};
    }
    throw std::logic_error(std::string("[") + what + "] no MPI type for " +
                           dtype_name(dtype) + ".");
  }

  Handle comm_;
  int rank_ = 0;
  int size_ = 1;
};

bool launched_by_mpirun() {
  return !env::value("OMPI_COMM_WORLD_SIZE").empty() ||
         !env::value("PMIX_RANK").empty();
}

} // namespace

bool mpi_library_loads() { return api().lib != nullptr; }

void mpi_abort(int code) {
  auto& a = api();
  int initialized = 0, finalized = 0;
  if (!a.lib || a.Initialized(&initialized) != kSuccess || !initialized ||
      a.Finalized(&finalized) != kSuccess || finalized) {
    return;
  }
  a.Abort(a.comm_world, code);
}

std::shared_ptr<Communicator> mpi_communicator(std::string& why) {
  auto& a = api();
  if (!a.lib) {
    why = a.error;
    return nullptr;
  }
  if (!launched_by_mpirun()) {
    why = "this process was not started by mpirun or python -m kiln.launch";
    return nullptr;
  }
  static std::once_flag once;
  static std::string init_error;
  std::call_once(once, [&] {
    int initialized = 0;
    a.Initialized(&initialized);
    int provided = 0;
    if (!initialized &&
        a.Init_thread(nullptr, nullptr, kThreadSerialized, &provided) !=
            kSuccess) {
      init_error = "MPI_Init_thread failed";
      return;
    }
    a.Comm_set_errhandler(a.comm_world, a.errors_return);
    constexpr auto sum = ReduceOp::sum;
    a.Type_contiguous(2, a.byte, &a.half_type);
    a.Type_commit(&a.half_type);
    kiln_ops<float16_t>(a, a.f16_ops, true);
    kiln_ops<bfloat16_t>(a, a.bf16_ops, true);
    kiln_ops<float>(a, a.f32_ops, false); // MPI_SUM is kiln's sum for these
    kiln_ops<double>(a, a.f64_ops, false);
    a.Op_create(&reduce_complex<ReduceOp::max>, 1, &a.c64_ops[1]);
    a.Op_create(&reduce_complex<ReduceOp::min>, 1, &a.c64_ops[2]);
    a.Op_create(&reduce_as_kiln<int8_t, sum>, 1, &a.wrapping_sum[0]);
    a.Op_create(&reduce_as_kiln<uint8_t, sum>, 1, &a.wrapping_sum[1]);
    a.Op_create(&reduce_as_kiln<int16_t, sum>, 1, &a.wrapping_sum[2]);
    a.Op_create(&reduce_as_kiln<uint16_t, sum>, 1, &a.wrapping_sum[3]);
    a.Type_contiguous(sizeof(Fused), a.byte, &a.fused_type);
    a.Type_commit(&a.fused_type);
    a.Op_create(&reduce_fused, 1, &a.fused_op);
    if (!initialized) std::atexit(finalize_at_exit);
  });
  if (!init_error.empty()) {
    why = init_error;
    return nullptr;
  }
  static auto world = std::make_shared<Mpi>(a.comm_world);
  return world;
}

} // namespace kiln::distributed::detail
