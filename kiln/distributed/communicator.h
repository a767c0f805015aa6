// What a backend provides: collectives and point-to-point transfers over
// contiguous buffers, host memory for MPI, device memory for NCCL. The
// primitives' eval_cpu and eval_gpu call these; a backend never sees arrays
// or graphs.
#pragma once

#include <chrono>
#include <cstddef>
#include <memory>
#include <string>
#include <utility>

#include "kiln/core/array.h"
#include "kiln/core/dtype.h"

namespace kiln::distributed::detail {

enum class ReduceOp { sum, max, min };

/** What all_reduce_agreeing did. */
enum class Agreement {
  reduced,     // every process passed the same signature; out is reduced
  agreed,      // the same signature everywhere; the array is too large to
               // have travelled with it, so nothing is reduced yet
  differ,      // the signatures differ; nothing is reduced
  unsupported, // this backend has no such exchange; nothing happened
};

class Communicator {
 public:
  virtual ~Communicator() = default;
  virtual int rank() const = 0;
  virtual int size() const = 0;
  virtual const char* backend() const = 0;
  virtual std::shared_ptr<Communicator> split(int color, int key) = 0;

  /** Whether the buffers are device memory, each call queued on the CUDA
   *  stream passed as `stream` (host backends take nullptr and return when
   *  the call is done). */
  virtual bool on_device() const { return false; }

  // `what` names the op in errors. Counts are elements of dtype.
  /** in == out reduces in place. */
  virtual void all_reduce(const void* in, void* out, size_t count, Dtype dtype,
                          ReduceOp op, const char* what, void* stream) = 0;
  /** The check of check_agree and an all_reduce of up to
   *  agreeing_payload() bytes in one exchange: every process sends
   *  `signature` (the same number of bytes everywhere) with its array when
   *  the array fits. Every process gets the same answer, so all take the
   *  same next step. */
  virtual Agreement all_reduce_agreeing(const void* signature, size_t bytes,
                                        const void* in, void* out,
                                        size_t count, Dtype dtype, ReduceOp op,
                                        const char* what) {
    (void)signature, (void)bytes, (void)in, (void)out, (void)count;
    (void)dtype, (void)op, (void)what;
    return Agreement::unsupported;
  }
  virtual size_t agreeing_payload() const { return 0; }
  /** The size in bytes of the last all_reduce every process agreed on, the
   *  same on every process: all_reduce_checked's guess of the next one. */
  size_t last_agreed_bytes = 0;

  /** out holds size() blocks of `bytes`, in rank order. */
  virtual void all_gather(const void* in, void* out, size_t bytes,
                          const char* what, void* stream) = 0;
  /** in holds size() blocks of `count` elements; out gets the reduction
   *  of block rank(). */
  virtual void reduce_scatter(const void* in, void* out, size_t count,
                              Dtype dtype, ReduceOp op, const char* what,
                              void* stream) = 0;
  virtual void send(const void* buf, size_t bytes, int dst, const char* what,
                    void* stream) = 0;
  virtual void recv(void* buf, size_t bytes, int src, const char* what,
                    void* stream) = 0;
};

/** The singleton group: one process, collectives are never formed. */
std::shared_ptr<Communicator> singleton_communicator();

/** OpenMPI loaded at run time; nullptr when it does not load (why: the
 *  reason) or this process was not started by mpirun. */
std::shared_ptr<Communicator> mpi_communicator(std::string& why);
bool mpi_library_loads();
/** The rank and group size this process was started with by mpirun or
 *  the launcher; {-1, 0} when neither started it. */
std::pair<int, int> launched_rank();

/** NCCL over the GPUs (kiln_cuda, loaded at run time): nullptr when it
 *  cannot form a group (why: the reason). Its unique id travels from rank
 *  0 through broadcast_from_root. */
std::shared_ptr<Communicator> nccl_communicator(std::string& why);
bool nccl_library_loads();

/** Rank 0's `bytes` on every process of the job, before any group exists:
 *  through MPI under mpirun, else through the file the launcher names
 *  (KILN_RENDEZVOUS_FILE). Waits at most timeout(). */
void broadcast_from_root(void* bytes, size_t n, int rank, int size);
/** Ends every process of the MPI job with this exit code (a process that
 *  fails must not leave its peers waiting); nothing without MPI. */
void mpi_abort(int code);

/** How long a process waits for its peers before raising
 *  (KILN_DISTRIBUTED_TIMEOUT, seconds; default 300). */
std::chrono::milliseconds timeout();

/** Whether collectives first check that every process passes the same
 *  shape and dtype (KILN_DISTRIBUTED_CHECK; default on over host memory,
 *  off over device memory). The check passes host buffers with a null
 *  stream, which a device backend stages through the GPU. */
bool check_signatures(const Communicator& comm);

/** Raises on every process of the group, listing each process's shape and
 *  dtype, when they differ; `what` names the op. */
void check_agree(Communicator& comm, const char* what, const array& x);
/** all_reduce of x's data (`in`, row-major) into `out`, after the check
 *  of check_agree when it is on: in one exchange where the backend can
 *  carry a small array with its signature. */
void all_reduce_checked(Communicator& comm, const char* what, const array& x,
                        const void* in, void* out, ReduceOp op);
/** The same for a transfer: both sides must name the same shape and
 *  dtype; the receiver checks, and both raise on a mismatch. */
void check_transfer(Communicator& comm, const char* what, const array& x,
                    int peer, bool sender);

} // namespace kiln::distributed::detail
