// Before a device group exists its processes must agree on one token (NCCL's
// unique id, made by rank 0). Under mpirun MPI carries it; the launcher's
// local mode names a file in a fresh private folder, which rank 0 writes
// whole (a rename) and the others wait for.
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <fstream>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "kiln/core/env.h"
#include "kiln/distributed/communicator.h"

namespace kiln::distributed::detail {

namespace {

int integer_env(const char* name) {
  std::string v = env::value(name);
  if (v.empty()) return -1;
  try {
    return std::stoi(v);
  } catch (const std::exception&) {
    throw std::invalid_argument(std::string("[distributed] ") + name +
                                " must be an integer, got '" + v + "'.");
  }
}

void write_whole(const std::string& path, const void* bytes, size_t n) {
  std::string tmp = path + ".tmp" + std::to_string(getpid());
  {
    std::ofstream f(tmp, std::ios::binary);
    f.write(static_cast<const char*>(bytes), static_cast<std::streamsize>(n));
    if (!f) {
      throw std::runtime_error("[distributed] cannot write the rendezvous "
                               "file " + tmp + ".");
    }
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0) {
    throw std::runtime_error("[distributed] cannot rename " + tmp + " to " +
                             path + ".");
  }
}

void wait_and_read(const std::string& path, void* bytes, size_t n, int rank) {
  auto start = std::chrono::steady_clock::now();
  for (;;) {
    std::ifstream f(path, std::ios::binary);
    if (f) {
      std::vector<char> data(n + 1);
      f.read(data.data(), static_cast<std::streamsize>(n + 1));
      if (static_cast<size_t>(f.gcount()) != n) {
        throw std::runtime_error(
            "[distributed] the rendezvous file " + path + " holds " +
            std::to_string(f.gcount()) + " bytes, not " + std::to_string(n) +
            ".");
      }
      std::copy(data.begin(), data.begin() + n, static_cast<char*>(bytes));
      return;
    }
    if (std::chrono::steady_clock::now() - start > timeout()) {
      throw std::runtime_error(
          "[distributed] rank " + std::to_string(rank) + " waited " +
          std::to_string(timeout().count() / 1000) + " s for rank 0 to "
          "write " + path + " (KILN_DISTRIBUTED_TIMEOUT): rank 0 died or "
          "never started.");
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
}

} // namespace

std::pair<int, int> launched_rank() {
  int rank = integer_env("KILN_RANK"), size = integer_env("KILN_WORLD_SIZE");
  if (rank < 0) {
    rank = integer_env("OMPI_COMM_WORLD_RANK");
    size = integer_env("OMPI_COMM_WORLD_SIZE");
  }
  if (rank < 0 || size <= 0) return {-1, 0};
  if (rank >= size) {
    throw std::invalid_argument(
        "[distributed] this process's rank " + std::to_string(rank) +
        " is not below the job's size " + std::to_string(size) + ".");
  }
  return {rank, size};
}

void broadcast_from_root(void* bytes, size_t n, int rank, int size) {
  std::string file = env::value("KILN_RENDEZVOUS_FILE");
  if (!file.empty()) {
    if (rank == 0) {
      write_whole(file, bytes, n);
    } else {
      wait_and_read(file, bytes, n, rank);
    }
    return;
  }
  std::string why;
  auto mpi = mpi_communicator(why);
  if (!mpi) {
    throw std::runtime_error(
        "[distributed] the processes cannot exchange NCCL's id: start them "
        "with python -m kiln.launch or mpirun (" + why + ").");
  }
  if (mpi->rank() != rank || mpi->size() != size) {
    throw std::logic_error("[distributed] MPI's rank and size differ from "
                           "the launcher's.");
  }
  std::vector<char> all(n * static_cast<size_t>(size));
  mpi->all_gather(bytes, all.data(), n, "distributed.init", nullptr);
  std::copy(all.begin(), all.begin() + n, static_cast<char*>(bytes));
}

} // namespace kiln::distributed::detail
