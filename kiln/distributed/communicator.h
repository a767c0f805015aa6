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
/** The same for a transfer: both sides must name the same shape and
 *  dtype; the receiver checks, and both raise on a mismatch. */
void check_transfer(Communicator& comm, const char* what, const array& x,
                    int peer, bool sender);

} // namespace kiln::distributed::detail
