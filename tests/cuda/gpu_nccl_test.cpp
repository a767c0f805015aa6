// The NCCL backend on one GPU: a group of one process formed through the
// launcher's variables and rendezvous file, and each primitive evaluated on
// a GPU stream through NCCL (the ops skip a group of one, so the tests
// build the primitives directly). Groups of several GPUs run in the
// distributed GPU suite.
#include <cstdlib>
#include <filesystem>

#include "cuda/gpu_fixture.h"
#include "kiln/distributed/communicator.h"
#include "kiln/distributed/primitives.h"

namespace kiln::test {
namespace {

namespace fs = std::filesystem;
using namespace kiln::distributed;
namespace dd = kiln::distributed::detail;

class GpuNccl : public GpuTest {
 protected:
  void SetUp() override {
    GpuTest::SetUp();
    if (IsSkipped()) return;
    if (!dd::nccl_library_loads()) GTEST_SKIP() << "NCCL does not load";
    static Group* world = [] {
      std::string folder =
          (fs::temp_directory_path() / ("kiln-nccl-" +
                                        std::to_string(getpid())))
              .string();
      fs::create_directories(folder);
      setenv("KILN_RANK", "0", 1);
      setenv("KILN_WORLD_SIZE", "1", 1);
      setenv("KILN_RENDEZVOUS_FILE", (folder + "/id").c_str(), 1);
      Group* g = new Group(init(true, "nccl"));
      unsetenv("KILN_RANK");
      unsetenv("KILN_WORLD_SIZE");
      unsetenv("KILN_RENDEZVOUS_FILE");
      fs::remove_all(folder);
      return g;
    }();
    group_ = *world;
  }
  Group group_{nullptr};
};

Stream gpu_stream() { return default_stream(Device::gpu); }

TEST_F(GpuNccl, FormsAGroupOfOne) {
  EXPECT_EQ(group_.backend(), "nccl");
  EXPECT_EQ(group_.size(), 1);
  EXPECT_EQ(group_.rank(), 0);
  Group sub = group_.split(0);
  EXPECT_EQ(sub.size(), 1);
  EXPECT_EQ(sub.backend(), "nccl");
}

TEST_F(GpuNccl, ReductionsOfEveryDtypeNcclHas) {
  for (Dtype dt : {bool_, int8, uint8, int32, uint32, int64, uint64, float16,
                   bfloat16, float32, float64, complex64}) {
    for (auto op : {dd::ReduceOp::sum, dd::ReduceOp::max,
                    dd::ReduceOp::min}) {
      if (dt == complex64 && op != dd::ReduceOp::sum) continue;
      // A transposed input: the primitive copies it row-major first.
      array x = transpose(random_array({37, 5}, dt), {1, 0});
      array y(x.shape(), dt,
              std::make_shared<AllReduce>(gpu_stream(), group_, op), {x});
      eval(y);
      EXPECT_TRUE(array_equal(y, x).item<bool>())
          << dtype_name(dt) << " op " << static_cast<int>(op);
    }
  }
}

TEST_F(GpuNccl, InPlaceSumOfADonatedInput) {
  array x = random_array({1 << 16}, float32);
  array expected = exp(x, Device::cpu);
  array y(x.shape(), float32,
          std::make_shared<AllReduce>(gpu_stream(), group_,
                                      dd::ReduceOp::sum),
          {exp(x, Device::gpu)});
  eval(y);
  EXPECT_TRUE(allclose(y, expected).item<bool>());
}

TEST_F(GpuNccl, GatherAndScatterOfOne) {
  array x = random_array({6, 3}, bfloat16);
  array g(x.shape(), x.dtype(),
          std::make_shared<AllGather>(gpu_stream(), group_), {x});
  array s(x.shape(), x.dtype(),
          std::make_shared<ReduceScatter>(gpu_stream(), group_), {x});
  eval({g, s});
  EXPECT_TRUE(array_equal(g, x).item<bool>());
  EXPECT_TRUE(array_equal(s, x).item<bool>());
}

TEST_F(GpuNccl, ChecksStagedThroughTheDeviceAgree) {
  // KILN_DISTRIBUTED_CHECK's exchange passes host buffers to the device
  // backend, which stages them through the GPU.
  array x = random_array({5}, float32);
  dd::check_agree(*group_.communicator(), "all_sum", x);
}

} // namespace
} // namespace kiln::test
