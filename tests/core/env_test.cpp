// Environment settings (core/env.h): each kind of setting parsed one way.
#include <cstdlib>

#include <gtest/gtest.h>

#include "kiln/core/env.h"

namespace kiln::test {
namespace {

TEST(Env, ValueAndFlag) {
  const char* name = "KILN_ENV_TEST_SETTING";
  ::unsetenv(name);
  EXPECT_EQ(env::value(name), "");
  EXPECT_TRUE(env::flag(name, true));
  EXPECT_FALSE(env::flag(name, false));
  ::setenv(name, "", 1);
  EXPECT_TRUE(env::flag(name, true)); // empty: as unset
  ::setenv(name, "0", 1);
  EXPECT_EQ(env::value(name), "0");
  EXPECT_FALSE(env::flag(name, true));
  for (const char* on : {"1", "yes", "2"}) {
    ::setenv(name, on, 1);
    EXPECT_TRUE(env::flag(name, false)) << on;
  }
  ::unsetenv(name);
}

} // namespace
} // namespace kiln::test
