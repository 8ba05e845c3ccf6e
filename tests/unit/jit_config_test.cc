// The JIT's daemon flags: --jit, --jit_cache_dir, --jit_cache_max_mb.
#include <gtest/gtest.h>

#include "config.h"

namespace kerneld::server {
namespace {

std::string Parse(std::vector<const char*> args, Config* cfg) {
  args.insert(args.begin(), "kerneld");
  bool help = false;
  return ParseFlags(static_cast<int>(args.size()), const_cast<char**>(args.data()), cfg, &help);
}

TEST(JitConfig, Defaults) {
  Config c;
  EXPECT_EQ(Parse({}, &c), "");
  EXPECT_EQ(c.jit, "async");
  EXPECT_EQ(c.jit_cache_dir, "");
  EXPECT_EQ(c.jit_cache_max_mb, 1024);
  for (const char* flag : {"--jit=", "--jit_cache_dir=", "--jit_cache_max_mb="})
    EXPECT_NE(FlagsHelp().find(flag), std::string::npos) << flag;
}

TEST(JitConfig, TakesEachModeAndRefusesOthersByName) {
  for (const char* mode : {"async", "sync", "off"}) {
    Config c;
    EXPECT_EQ(Parse({"--jit", mode}, &c), "") << mode;
    EXPECT_EQ(c.jit, mode);
  }
  Config c;
  const std::string err = Parse({"--jit=lazy"}, &c);
  EXPECT_NE(err.find("--jit"), std::string::npos) << err;
  EXPECT_NE(err.find("lazy"), std::string::npos) << err;
}

TEST(JitConfig, CacheDirAndCap) {
  Config c;
  EXPECT_EQ(Parse({"--jit_cache_dir=/var/cache/kerneld", "--jit_cache_max_mb=0"}, &c), "");
  EXPECT_EQ(c.jit_cache_dir, "/var/cache/kerneld");
  EXPECT_EQ(c.jit_cache_max_mb, 0);
  for (const char* bad : {"--jit_cache_dir=", "--jit_cache_max_mb=-1", "--jit_cache_max_mb=1G",
                          "--jit_cache_max_mb=99999999999"}) {
    Config b;
    EXPECT_NE(Parse({bad}, &b), "") << bad;
  }
}

TEST(JitConfig, PrecompileArchAndSms) {
  Config c;
  EXPECT_EQ(c.jit_precompile_arch, "");  // the daemon serves unless asked
  EXPECT_EQ(Parse({"--jit_precompile_arch=sm_90a", "--jit_precompile_sms=132"}, &c), "");
  EXPECT_EQ(c.jit_precompile_arch, "sm_90a");
  EXPECT_EQ(c.jit_precompile_sms, 132);
  for (const char* bad :
       {"--jit_precompile_arch=", "--jit_precompile_arch=90", "--jit_precompile_arch=sm_",
        "--jit_precompile_sms=-1", "--jit_precompile_sms=many"}) {
    Config b;
    EXPECT_NE(Parse({bad}, &b), "") << bad;
  }
  for (const char* flag : {"--jit_precompile_arch=", "--jit_precompile_sms="})
    EXPECT_NE(FlagsHelp().find(flag), std::string::npos) << flag;
}

}  // namespace
}  // namespace kerneld::server
