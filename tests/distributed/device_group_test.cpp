// The host side of device groups, without a GPU: the rendezvous that
// carries NCCL's id from rank 0 to the others, and the graph-time rules of
// the ops over a group whose buffers live on the device.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>

#include "kiln/core/device.h"
#include "kiln/distributed/communicator.h"
#include "kiln/distributed/distributed.h"
#include "kiln/ops/ops.h"

namespace kiln::distributed {
namespace {

namespace fs = std::filesystem;

fs::path fresh_folder() {
  std::string tmpl = (fs::temp_directory_path() / "kiln-rdv-XXXXXX").string();
  char* made = mkdtemp(tmpl.data());
  EXPECT_NE(made, nullptr);
  return fs::path(tmpl);
}

TEST(Rendezvous, EveryRankGetsRankZerosBytes) {
  fs::path folder = fresh_folder();
  std::string file = (folder / "rendezvous").string();
  constexpr int n = 3;
  pid_t kids[n];
  for (int r = 0; r < n; ++r) {
    kids[r] = fork();
    ASSERT_GE(kids[r], 0);
    if (kids[r] == 0) {
      setenv("KILN_RENDEZVOUS_FILE", file.c_str(), 1);
      if (r > 0) usleep(1000 * r); // some ranks come first, some after
      char bytes[128];
      std::memset(bytes, 'a' + r, sizeof bytes);
      int code = 0;
      try {
        detail::broadcast_from_root(bytes, sizeof bytes, r, n);
        for (char c : bytes) code |= c != 'a';
      } catch (...) {
        code = 2;
      }
      _exit(code);
    }
  }
  for (int r = 0; r < n; ++r) {
    int status = 0;
    ASSERT_EQ(waitpid(kids[r], &status, 0), kids[r]);
    EXPECT_TRUE(WIFEXITED(status));
    EXPECT_EQ(WEXITSTATUS(status), 0) << "rank " << r;
  }
  fs::remove_all(folder);
}

TEST(Rendezvous, AFileOfTheWrongSizeRaises) {
  fs::path folder = fresh_folder();
  std::string file = (folder / "rendezvous").string();
  std::ofstream(file) << "short";
  setenv("KILN_RENDEZVOUS_FILE", file.c_str(), 1);
  char bytes[128] = {};
  try {
    detail::broadcast_from_root(bytes, sizeof bytes, 1, 2);
    ADD_FAILURE() << "no error";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("holds 5 bytes, not 128"),
              std::string::npos)
        << e.what();
  }
  unsetenv("KILN_RENDEZVOUS_FILE");
  fs::remove_all(folder);
}

TEST(Rendezvous, LaunchedRankReadsTheLaunchersVariables) {
  setenv("KILN_RANK", "1", 1);
  setenv("KILN_WORLD_SIZE", "4", 1);
  auto [rank, size] = detail::launched_rank();
  EXPECT_EQ(rank, 1);
  EXPECT_EQ(size, 4);
  setenv("KILN_RANK", "4", 1);
  EXPECT_THROW(detail::launched_rank(), std::invalid_argument);
  setenv("KILN_RANK", "x", 1);
  EXPECT_THROW(detail::launched_rank(), std::invalid_argument);
  unsetenv("KILN_RANK");
  unsetenv("KILN_WORLD_SIZE");
}

// A group of two whose buffers live on the device; nothing is evaluated.
class DeviceGroup final : public detail::Communicator {
 public:
  int rank() const override { return 0; }
  int size() const override { return 2; }
  const char* backend() const override { return "nccl"; }
  bool on_device() const override { return true; }
  std::shared_ptr<Communicator> split(int, int) override { return nullptr; }
  void all_reduce(const void*, void*, size_t, Dtype, detail::ReduceOp,
                  const char*, void*) override {}
  void all_gather(const void*, void*, size_t, const char*, void*) override {}
  void reduce_scatter(const void*, void*, size_t, Dtype, detail::ReduceOp,
                      const char*, void*) override {}
  void send(const void*, size_t, int, const char*, void*) override {}
  void recv(void*, size_t, int, const char*, void*) override {}
};

Group device_group() { return Group(std::make_shared<DeviceGroup>()); }

std::string message_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const std::invalid_argument& e) {
    return e.what();
  }
  return "";
}

TEST(DeviceGroupOps, HostArraysAreRefusedWhenTheGraphIsBuilt) {
  array x = ones({4});
  std::string m = message_of([&] { all_sum(x, device_group(), Device::cpu); });
  EXPECT_NE(m.find("[all_sum] The 'nccl' group moves GPU arrays"),
            std::string::npos)
      << m;
  m = message_of([&] { all_gather(x, device_group(), Device::cpu); });
  EXPECT_NE(m.find("[all_gather]"), std::string::npos) << m;
  m = message_of([&] { recv({2}, float32, 1, device_group(), Device::cpu); });
  EXPECT_NE(m.find("[recv]"), std::string::npos) << m;
}

TEST(DeviceGroupOps, ComplexMaxAndMinRaise) {
  array z = astype(ones({4}), complex64);
  std::string m = message_of([&] { all_max(z, device_group()); });
  EXPECT_NE(m.find("[all_max] NCCL cannot order complex numbers"),
            std::string::npos)
      << m;
  m = message_of([&] { all_min(z, device_group()); });
  EXPECT_NE(m.find("[all_min]"), std::string::npos) << m;
}

TEST(DeviceGroupOps, SixteenBitIntegersTravelAsInt32) {
  if (!gpu::is_available()) GTEST_SKIP() << "needs a GPU stream";
  for (Dtype dt : {int16, uint16}) {
    array x = astype(ones({4}), dt);
    array y = all_sum(x, device_group(), Device::gpu);
    EXPECT_EQ(y.dtype(), dt);
    // astype(all_sum(astype(x, int32)), dt)
    ASSERT_TRUE(y.has_primitive());
    array reduced = y.inputs()[0];
    EXPECT_EQ(reduced.dtype(), int32);
    EXPECT_STREQ(reduced.primitive().name(), "all_sum");
    array s = sum_scatter(astype(ones({4}), dt), device_group(), Device::gpu);
    EXPECT_EQ(s.dtype(), dt);
    EXPECT_EQ(s.inputs()[0].dtype(), int32);
  }
}

} // namespace
} // namespace kiln::distributed
