#include <atomic>
#include <mutex>
#include <sstream>
#include <stdexcept>

#include "kiln/core/env.h"
#include "kiln/distributed/communicator.h"
#include "kiln/distributed/distributed.h"
#include "kiln/ops/utils.h"

namespace kiln::distributed {

namespace detail {

namespace {

class Singleton final : public Communicator {
  [[noreturn]] static void unreachable(const char* what) {
    throw std::logic_error(std::string("[") + what +
                           "] a collective reached the singleton group.");
  }

 public:
  int rank() const override { return 0; }
  int size() const override { return 1; }
  const char* backend() const override { return "singleton"; }
  std::shared_ptr<Communicator> split(int, int) override {
    throw std::invalid_argument(
        "[distributed] Cannot split the singleton group further.");
  }
  // The ops return their input for one process without forming a
  // primitive, so no collective reaches the singleton.
  void all_reduce(const void*, void*, size_t, Dtype, ReduceOp,
                  const char* what, void*) override {
    unreachable(what);
  }
  void all_gather(const void*, void*, size_t, const char* what,
                  void*) override {
    unreachable(what);
  }
  void reduce_scatter(const void*, void*, size_t, Dtype, ReduceOp,
                      const char* what, void*) override {
    unreachable(what);
  }
  void send(const void*, size_t, int, const char* what, void*) override {
    throw std::invalid_argument(std::string("[") + what +
                                "] Cannot send with a singleton group.");
  }
  void recv(void*, size_t, int, const char* what, void*) override {
    throw std::invalid_argument(std::string("[") + what +
                                "] Cannot recv with a singleton group.");
  }
};

// What check_agree compares: the op, the dtype and the shape (the first
// eight dimensions as written, all of them through a hash).
struct Signature {
  int32_t ndim;
  int32_t dtype;
  uint64_t shape_hash;
  int64_t dims[8];
};

Signature signature_of(const array& x) {
  Signature s{};
  s.ndim = static_cast<int32_t>(x.ndim());
  s.dtype = static_cast<int32_t>(x.dtype().val);
  uint64_t h = 1469598103934665603ull;
  for (size_t i = 0; i < x.ndim(); ++i) {
    h = (h ^ static_cast<uint64_t>(x.shape()[i])) * 1099511628211ull;
    if (i < 8) s.dims[i] = x.shape()[i];
  }
  s.shape_hash = h;
  return s;
}

bool same(const Signature& a, const Signature& b) {
  return a.ndim == b.ndim && a.dtype == b.dtype && a.shape_hash == b.shape_hash;
}

std::string describe(const Signature& s) {
  Shape shown(s.dims, s.dims + std::min(s.ndim, 8));
  std::string out = kiln::detail::shape_str(shown);
  if (s.ndim > 8)
    out += " (the first 8 of " + std::to_string(s.ndim) + " dims)";
  return out + " " + dtype_name(Dtype{static_cast<Dtype::Val>(s.dtype), 0});
}

} // namespace

std::shared_ptr<Communicator> singleton_communicator() {
  static auto s = std::make_shared<Singleton>();
  return s;
}

std::chrono::milliseconds timeout() {
  static const std::chrono::milliseconds t = [] {
    std::string v = env::value("KILN_DISTRIBUTED_TIMEOUT");
    double seconds = 300;
    if (!v.empty()) {
      try {
        seconds = std::stod(v);
      } catch (const std::exception&) {
        throw std::invalid_argument(
            "[distributed] KILN_DISTRIBUTED_TIMEOUT must be a number of "
            "seconds, got '" + v + "'.");
      }
    }
    return std::chrono::milliseconds(static_cast<int64_t>(seconds * 1000));
  }();
  return t;
}

bool check_signatures(const Communicator& comm) {
  // On by default over host memory; over NCCL the check would wait for the
  // GPU at every collective, so it is asked for (a mismatch there shows as
  // the watchdog's timeout naming the op).
  static const bool host = env::flag("KILN_DISTRIBUTED_CHECK", true);
  static const bool device = env::flag("KILN_DISTRIBUTED_CHECK", false);
  return comm.on_device() ? device : host;
}

void check_agree(Communicator& comm, const char* what, const array& x) {
  if (!check_signatures(comm)) return;
  Signature mine = signature_of(x);
  std::vector<Signature> all(comm.size());
  comm.all_gather(&mine, all.data(), sizeof(Signature), what, nullptr);
  bool agree = true;
  for (auto& s : all) agree = agree && same(s, all[0]);
  if (agree) return;
  std::ostringstream os;
  os << "[" << what << "] The group's " << comm.size()
     << " processes passed different arrays (rank " << comm.rank()
     << " raising):";
  for (size_t r = 0; r < all.size(); ++r) {
    os << (r ? "," : "") << " rank " << r << " " << describe(all[r]);
  }
  os << ". Every process must pass the same shape and dtype.";
  throw std::invalid_argument(os.str());
}

// The fused exchange costs the time of an all_reduce of its payload (1 KB
// over MPI), the separate check that of a 100-byte all_gather; each process
// picks one from what every process knows, the last agreed size (a
// training step repeats its sizes), so all pick the same one.
void all_reduce_checked(Communicator& comm, const char* what, const array& x,
                        const void* in, void* out, ReduceOp op) {
  if (check_signatures(comm)) {
    Signature mine = signature_of(x);
    size_t payload = comm.agreeing_payload();
    Agreement a = Agreement::unsupported;
    if (payload > 0 && comm.last_agreed_bytes <= payload) {
      a = comm.all_reduce_agreeing(&mine, sizeof mine, in, out, x.size(),
                                   x.dtype(), op, what);
    }
    if (a != Agreement::agreed && a != Agreement::reduced) {
      check_agree(comm, what, x); // names every process's array
    }
    comm.last_agreed_bytes = x.nbytes();
    if (a == Agreement::reduced) return;
  }
  comm.all_reduce(in, out, x.size(), x.dtype(), op, what, nullptr);
}

void check_transfer(Communicator& comm, const char* what, const array& x,
                    int peer, bool sender) {
  if (!check_signatures(comm)) return;
  Signature mine = signature_of(x);
  if (sender) {
    comm.send(&mine, sizeof mine, peer, what, nullptr);
    char verdict = 0;
    comm.recv(&verdict, 1, peer, what, nullptr);
    if (verdict == 0) return;
    std::ostringstream os;
    os << "[" << what << "] rank " << comm.rank() << " sends "
       << describe(mine) << " but rank " << peer
       << " expects another shape or dtype.";
    throw std::invalid_argument(os.str());
  }
  Signature theirs{};
  comm.recv(&theirs, sizeof theirs, peer, what, nullptr);
  char verdict = same(mine, theirs) ? 0 : 1;
  comm.send(&verdict, 1, peer, what, nullptr);
  if (verdict == 0) return;
  std::ostringstream os;
  os << "[" << what << "] rank " << comm.rank() << " expects "
     << describe(mine) << " from rank " << peer << ", which sends "
     << describe(theirs) << ".";
  throw std::invalid_argument(os.str());
}

} // namespace detail

Group::Group(std::shared_ptr<detail::Communicator> comm)
    : comm_(std::move(comm)) {}
int Group::rank() const { return comm_->rank(); }
int Group::size() const { return comm_->size(); }
std::string Group::backend() const { return comm_->backend(); }
Group Group::split(int color, int key) const {
  return Group(comm_->split(color, key));
}

namespace {

void check_backend_name(const std::string& b) {
  if (b != "any" && b != "mpi" && b != "nccl" && b != "ring" && b != "jaccl") {
    throw std::invalid_argument(
        "[distributed] The only valid values for backend are 'any', 'mpi', "
        "'nccl', 'ring' and 'jaccl' but '" + b + "' was provided.");
  }
}

std::mutex& init_mutex() {
  static std::mutex m;
  return m;
}

// One global group per backend, as MLX keeps; "any" gives the first formed.
std::shared_ptr<detail::Communicator>& global(const std::string& backend) {
  static std::shared_ptr<detail::Communicator> mpi, nccl, any;
  return backend == "mpi" ? mpi : backend == "nccl" ? nccl : any;
}

// Set once "any" holds a group of several processes, which then never
// changes: the ops ask for the default group on every call, and read it
// without the lock.
std::atomic<bool> any_formed{false};

// What "any" tries: the backend the launcher named (KILN_BACKEND), else
// MPI under mpirun (host arrays), else NCCL for the launcher's local
// processes.
std::string backend_for_any() {
  std::string named = env::value("KILN_BACKEND");
  if (!named.empty()) {
    check_backend_name(named);
    return named;
  }
  if (!env::value("OMPI_COMM_WORLD_SIZE").empty() ||
      !env::value("PMIX_RANK").empty()) {
    return "mpi";
  }
  if (!env::value("KILN_RANK").empty()) return "nccl";
  return "mpi";
}

std::shared_ptr<detail::Communicator> form(const std::string& backend,
                                           std::string& why) {
  if (backend == "mpi") return detail::mpi_communicator(why);
  if (backend == "nccl") return detail::nccl_communicator(why);
  why = "kiln has no '" + backend + "' backend (it has 'mpi' and 'nccl')";
  return nullptr;
}

} // namespace

bool is_available(const std::string& backend) {
  check_backend_name(backend);
  if (backend == "mpi") return detail::mpi_library_loads();
  if (backend == "nccl") return detail::nccl_library_loads();
  if (backend == "any") {
    return detail::mpi_library_loads() || detail::nccl_library_loads();
  }
  return false;
}

Group init(bool strict, const std::string& backend) {
  if (backend == "any" && any_formed.load(std::memory_order_acquire)) {
    return Group(global("any"));
  }
  check_backend_name(backend);
  std::lock_guard<std::mutex> lock(init_mutex());
  auto& g = global(backend);
  if (g && g->size() > 1) return Group(g);
  std::string chosen = backend == "any" ? backend_for_any() : backend;
  std::string why;
  std::shared_ptr<detail::Communicator> c;
  try {
    c = form(chosen, why);
  } catch (const std::runtime_error& e) {
    // A library that refuses the group (NCCL's invalid usage): the reason,
    // and for "any" the singleton group.
    if (strict) throw;
    why = e.what();
  }
  // One process (mpirun -n 1, or MPI started by another library in this
  // process) is the singleton group unless the backend was named.
  if (c && (c->size() > 1 || backend != "any")) {
    g = c;
    global(chosen) = c;
    if (!global("any")) global("any") = c;
    if (global("any")->size() > 1) {
      any_formed.store(true, std::memory_order_release);
    }
    return Group(g);
  }
  if (c) why = "the job has one process";
  if (strict) {
    throw std::runtime_error("[distributed] Couldn't initialize the '" +
                             backend + "' backend: " + why + ".");
  }
  if (!g) g = detail::singleton_communicator();
  return Group(g);
}

} // namespace kiln::distributed
