// kernelctl as a tool people use: --help on every subcommand, and `run`
// infers each input's shape from the op's schema.
#include <cstdio>

#include "daemon_fixture.h"

namespace kerneld::testing {
namespace {

// Runs kernelctl with `args`; returns its exit status and fills *out.
int Ctl(const std::string& args, std::string* out) {
  return RunCapture(std::string(KERNELCTL_BINARY) + " " + args, out);
}

TEST(Kernelctl, HelpOnEverySubcommand) {
  for (const char* sub : {"replay --help", "run --help", "run scale -h", "list --help", "info --help",
                          "health --help", "--help"}) {
    std::string out;
    // No daemon is needed: help never connects or opens a file.
    EXPECT_EQ(Ctl(std::string("--target 127.0.0.1:1 ") + sub, &out), 0) << sub << ": " << out;
    EXPECT_NE(out.find("usage: kernelctl"), std::string::npos) << sub << ": " << out;
    EXPECT_EQ(out.find("cannot open"), std::string::npos) << out;
  }
}

TEST(Kernelctl, RunInfersShapesFromTheSchema) {
  Daemon d;
  ASSERT_TRUE(d.ok()) << d.Log();
  std::string out;
  // rmsnorm --shape 16x64 sends weight [64] (it sent [16, 64] and was refused).
  EXPECT_EQ(Ctl("--target " + d.target() + " run rmsnorm --shape 16x64 --check", &out), 0) << out;
  EXPECT_NE(out.find("PASS"), std::string::npos) << out;
  EXPECT_EQ(Ctl("--target " + d.target() + " run layernorm --shape 3x5x8 --dtype bfloat16 --check", &out), 0)
      << out;
  EXPECT_EQ(Ctl("--target " + d.target() + " run fused_add_rmsnorm --shape 4x32 --check", &out), 0) << out;
  EXPECT_EQ(d.Terminate(), 0);
}

}  // namespace
}  // namespace kerneld::testing
