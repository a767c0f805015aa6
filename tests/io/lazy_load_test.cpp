// Loading from a file is lazy (each array reads its bytes when evaluated,
// as MLX's load), and saving replaces a file whole, so arrays loaded from
// it keep reading the bytes they were loaded from.
#include <sys/stat.h>

#include "io/io_helpers.h"

namespace kiln::test {
namespace {

class LazyLoad : public IoTest {};

bool lazy(const array& a) {
  return a.has_primitive() && std::string(a.primitive().name()) == "Load";
}

TEST_F(LazyLoad, ArraysReadTheirBytesWhenEvaluated) {
  array a = random_array({3, 5}, float32);
  array b = astype(random_array({7}, float32), bfloat16);
  array c = greater(random_array({4}, float32), array(0.0f));
  save_safetensors(path("m.safetensors"), {{"a", a}, {"b", b}, {"c", c}});
  auto [loaded, meta] = load_safetensors(path("m.safetensors"));
  for (auto& [name, x] : loaded) EXPECT_TRUE(lazy(x)) << name;
  // The file may go away: the arrays hold it open.
  std::filesystem::remove(path("m.safetensors"));
  EXPECT_TRUE(array_equal(loaded.at("a"), a).item<bool>());
  EXPECT_TRUE(array_equal(loaded.at("b"), b).item<bool>());
  EXPECT_TRUE(array_equal(loaded.at("c"), c).item<bool>());

  save(path("x.npy"), transpose(a));
  array n = load(path("x.npy"));
  EXPECT_TRUE(array_equal(n, transpose(a)).item<bool>());
  save_gguf(path("g.gguf"), {{"w", a}}, {});
  auto [g, gm] = load_gguf(path("g.gguf"));
  EXPECT_TRUE(lazy(g.at("w")));
  EXPECT_TRUE(array_equal(g.at("w"), a).item<bool>());
}

TEST_F(LazyLoad, SavingOverTheSourceKeepsTheLoadedBytes) {
  array a = random_array({64}, float32);
  save_safetensors(path("w.safetensors"), {{"w", a}});
  auto loaded = load_safetensors(path("w.safetensors")).first.at("w");
  // Save the unevaluated array, and something else, over its own file.
  save_safetensors(path("w.safetensors"),
                   {{"w", loaded}, {"twice", multiply(loaded, array(2.0f))}});
  auto again = load_safetensors(path("w.safetensors")).first;
  EXPECT_TRUE(array_equal(again.at("w"), a).item<bool>());
  EXPECT_TRUE(
      array_equal(again.at("twice"), multiply(a, array(2.0f))).item<bool>());
  save_safetensors(path("w.safetensors"), {{"w", zeros({64})}});
  EXPECT_TRUE(array_equal(loaded, a).item<bool>());
}

TEST_F(LazyLoad, AFileCutShortAfterLoadingIsAnErrorWhenEvaluated) {
  save(path("x.npy"), random_array({1000}, float32));
  array x = load(path("x.npy"));
  // Another program truncates the file in place.
  std::filesystem::resize_file(path("x.npy"), 200);
  try {
    x.eval();
    ADD_FAILURE() << "no error";
  } catch (const std::runtime_error& e) {
    std::string m = e.what();
    EXPECT_NE(m.find("shorter than when it was loaded"), std::string::npos)
        << m;
    EXPECT_NE(m.find(path("x.npy")), std::string::npos) << m;
  }
}

TEST_F(LazyLoad, SavesKeepPermissionsFollowLinksAndWriteDevices) {
  save(path("p.npy"), ones({3}));
  chmod(path("p.npy").c_str(), 0640);
  save(path("p.npy"), zeros({3}));
  struct stat st;
  ASSERT_EQ(stat(path("p.npy").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0640u);
  std::filesystem::create_symlink(path("p.npy"), path("link.npy"));
  save(path("link.npy"), full({2}, 7.0f));
  EXPECT_TRUE(std::filesystem::is_symlink(path("link.npy")));
  EXPECT_EQ(to_doubles(load(path("p.npy"))), (std::vector<double>{7, 7}));
  save("/dev/null", ones({2}));
  // No temporary file is left beside the saved ones.
  int files = 0;
  for (auto& e : std::filesystem::directory_iterator(dir_)) {
    (void)e;
    ++files;
  }
  EXPECT_EQ(files, 2);
}

} // namespace
} // namespace kiln::test
