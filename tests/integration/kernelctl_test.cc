// kernelctl as a tool people use: --help on every command, values checked
// before anything is sent, status codes by name, and `run OP --shape S`
// working for every op from the schema alone.
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "daemon_fixture.h"

namespace kerneld::testing {
namespace {

// Runs kernelctl with `args`; returns its exit status and fills *out.
int Ctl(const std::string& args, std::string* out) {
  return RunCapture(std::string(KERNELCTL_BINARY) + " " + args, out);
}

bool Has(const std::string& out, const std::string& what) {
  return out.find(what) != std::string::npos;
}

// No daemon is needed: help never connects or opens a file. Each command
// prints its own usage: its options, not another command's (all seven
// printed the same 60-line global usage).
TEST(Kernelctl, HelpOnEverySubcommand) {
  const struct {
    std::string args, usage, own, foreign;
  } cases[] = {
      {"replay --help", "Usage: kernelctl replay", "--speed", "--pipeline"},
      {"run --help", "Usage: kernelctl run", "--pipeline", "--compare-floor"},
      {"run scale -h", "Usage: kernelctl run", "--check", "--speed"},
      {"perf --help", "Usage: kernelctl perf", "--compare-floor", "--pipeline"},
      {"list --help", "Usage: kernelctl list", "[OP]", "--shape"},
      {"info --help", "Usage: kernelctl info", "--help", "--shape"},
      {"health --help", "Usage: kernelctl health", "--help", "--shape"},
      {"buffers --help", "Usage: kernelctl buffers", "register-shm", "--shape"},
      {"buffers register-shm --help", "Usage: kernelctl buffers register-shm", "--lease",
       "--shape"},
      {"--help", "Usage: kernelctl", "--target", "--pipeline"},
      {"help run", "Usage: kernelctl run", "--pipeline", "--compare-floor"},
  };
  for (const auto& c : cases) {
    std::string out;
    EXPECT_EQ(Ctl("--target 127.0.0.1:1 " + c.args, &out), 0) << c.args << ": " << out;
    EXPECT_TRUE(Has(out, c.usage)) << c.args << ": " << out;
    EXPECT_TRUE(Has(out, c.own)) << c.args << ": " << out;
    EXPECT_FALSE(Has(out, c.foreign)) << c.args << ": " << out;
    EXPECT_FALSE(Has(out, "cannot open")) << out;
  }
}

// A value kernelctl cannot use is refused (exit 2) with the option and what
// it wants, before anything connects: the daemon address here is closed.
// Each of these used to run: --repeat abc once, --shape 16x as [16],
// --pipeline without --stream as ping-pong.
TEST(Kernelctl, BadValuesAreRefusedWithAMessage) {
  const struct {
    std::string args, message;
  } cases[] = {
      {"run scale --repeat abc", "--repeat: expected a positive integer, got 'abc'"},
      {"run scale --repeat -3", "--repeat: expected a positive integer, got '-3'"},
      {"run scale --repeat 0", "--repeat: expected a positive integer"},
      {"run scale --shape 16x", "--shape: expected non-negative dims"},
      {"run scale --shape 16x-4", "--shape: expected non-negative dims"},
      {"run scale --shape abc", "--shape: expected non-negative dims"},
      {"run scale --dtype float17", "unknown dtype 'float17'"},
      {"run scale --attr factor", "--attr: expected K=V"},
      {"run rope --input positions=int32", "--input: expected NAME=DTYPE:SHAPE"},
      {"run scale --via carrier-pigeon", "--via"},
      {"run scale --seed -1", "--seed: expected a non-negative integer"},
      {"run scale --stream --pipeline 0", "--pipeline: expected a positive integer"},
      {"run scale --pipeline 4", "--pipeline requires --stream"},
      {"run scale --gpu 1", "--gpu picks the CUDA device for --via ipc or server-buffer"},
      {"run scale --no-such-flag", "--no-such-flag"},
      {"run", "OP is required"},
      {"perf scale --concurrency 1,,4", "--concurrency: expected positive integers"},
      {"perf scale --concurrency -2", "--concurrency: expected positive integers"},
      {"perf scale --request-rate 0", "--request-rate: expected positive numbers"},
      {"perf scale --request-rate 100 --concurrency 4", "excludes"},
      {"perf scale --request-rate 100 --connections 2", "excludes"},
      {"perf scale --request-rate 100 --mode stream", "--request-rate sends unary requests"},
      {"perf scale --window-ms 5", "--window-ms: expected an integer >= 10"},
      {"perf scale --max-windows 2", "--max-windows: expected an integer >= 3"},
      {"perf scale --connections -1", "--connections: expected a non-negative integer"},
      {"replay trace.bin --concurrency abc", "--concurrency: expected a positive integer"},
      {"replay trace.bin --speed -1", "--speed: expected a number >= 0"},
      {"buffers register-shm /x 4096 --lease -5", "--lease: expected a non-negative integer"},
      {"buffers register-shm /x lots", "BYTES: expected a non-negative integer"},
      {"bogus", "unknown command 'bogus'"},
  };
  for (const auto& c : cases) {
    std::string out;
    EXPECT_EQ(Ctl("--target 127.0.0.1:1 " + c.args, &out), 2) << c.args << ": " << out;
    EXPECT_TRUE(Has(out, c.message)) << c.args << ": " << out;
    EXPECT_FALSE(Has(out, "UNAVAILABLE")) << c.args << ": never connects: " << out;
  }
}

// gRPC's codes by name, as scripts match them (it printed "14").
TEST(Kernelctl, StatusCodesByName) {
  std::string out;
  EXPECT_EQ(Ctl("--target 127.0.0.1:1 info", &out), 1) << out;
  EXPECT_TRUE(Has(out, "kernelctl: UNAVAILABLE: ")) << out;
  EXPECT_FALSE(Has(out, "kernelctl: 14")) << out;
}

TEST(Kernelctl, RunInfersShapesFromTheSchema) {
  Daemon d;
  ASSERT_TRUE(d.ok()) << d.Log();
  std::string out;
  // rmsnorm --shape 16x64 sends weight [64] (it sent [16, 64] and was refused).
  EXPECT_EQ(Ctl("--target " + d.target() + " run rmsnorm --shape 16x64 --check", &out), 0) << out;
  EXPECT_TRUE(Has(out, "PASS")) << out;
  EXPECT_EQ(
      Ctl("--target " + d.target() + " run layernorm --shape 3x5x8 --dtype bfloat16 --check", &out),
      0)
      << out;
  EXPECT_EQ(Ctl("--target " + d.target() + " run fused_add_rmsnorm --shape 4x32 --check", &out), 0)
      << out;
  EXPECT_EQ(d.Terminate(), 0);
}

// A repeated single-valued option takes its last value (a repeated
// --target was "unknown command"); every option answers to both spellings.
TEST(Kernelctl, RepeatedOptionsAndBothSpellings) {
  Daemon d;
  ASSERT_TRUE(d.ok()) << d.Log();
  std::string out;
  EXPECT_EQ(Ctl("--target 127.0.0.1:1 --target " + d.target() + " info", &out), 0) << out;
  EXPECT_EQ(Ctl("--target " + d.target() +
                    " run scale --shape 8 --shape 16 --attr factor=2 --repeat 1 --repeat 3",
                &out),
            0)
      << out;
  EXPECT_TRUE(Has(out, "(n=3)")) << out;
  // Global options after the command too.
  EXPECT_EQ(Ctl("health --target " + d.target(), &out), 0) << out;
  for (const char* flags : {"--request-rate 200 --window-ms 50 --max-windows 3",
                            "--request_rate 200 --window_ms 50 --max_windows 3"}) {
    EXPECT_EQ(
        Ctl("--target " + d.target() + " perf scale --shape 16 --attr factor=2 " + flags, &out), 0)
        << flags << ": " << out;
    EXPECT_TRUE(Has(out, "rate=200")) << flags << ": " << out;
  }
  for (const char* flag : {"--tls-ca", "--tls_ca"}) {
    EXPECT_EQ(Ctl("--target " + d.target() + " " + flag + " /nonexistent.pem info", &out), 2)
        << out;
    EXPECT_TRUE(Has(out, "cannot read --tls-ca /nonexistent.pem")) << flag << ": " << out;
  }
  EXPECT_EQ(d.Terminate(), 0);
}

// A dtype the op does not take is an error: --dtype float64 used to send
// float16 and print PASS.
TEST(Kernelctl, ADTypeTheOpDoesNotTakeIsAnError) {
  Daemon d;
  ASSERT_TRUE(d.ok()) << d.Log();
  std::string out;
  EXPECT_EQ(Ctl("--target " + d.target() +
                    " run scale --dtype float64 --shape 16 --attr factor=2 --check",
                &out),
            2)
      << out;
  EXPECT_TRUE(Has(out, "--dtype float64 is not one input 'x' takes (float16, bfloat16, float32)"))
      << out;
  EXPECT_FALSE(Has(out, "PASS")) << out;
  EXPECT_EQ(
      Ctl("--target " + d.target() + " run top_k_top_p_sampling --shape 4x100 --dtype float16",
          &out),
      2)
      << out;
  EXPECT_TRUE(Has(out, "input 'probs' takes (float32)")) << out;
  // --input is checked likewise, and names an input the op has.
  EXPECT_EQ(
      Ctl("--target " + d.target() + " run rope --shape 4x2x8 --input positions=float32:4", &out),
      2)
      << out;
  EXPECT_TRUE(Has(out, "input 'positions' takes int32, int64, not float32")) << out;
  EXPECT_EQ(Ctl("--target " + d.target() + " run rope --shape 4x2x8 --input pos=int32:4", &out), 2)
      << out;
  EXPECT_TRUE(Has(out, "rope has no input 'pos' (its inputs: q, k, positions, cos_sin_cache)"))
      << out;
  // The dtype asked for is the dtype sent.
  EXPECT_EQ(Ctl("--target " + d.target() +
                    " run scale --dtype bfloat16 --shape 16 --attr factor=2 --check",
                &out),
            0)
      << out;
  EXPECT_TRUE(Has(out, "rtol=0.01")) << out;  // bfloat16's tolerance: bfloat16 came back
  EXPECT_EQ(d.Terminate(), 0);
}

// perf stops a level whose whole window failed and says why: without the
// required attr it sent 326,572 failing requests over ten windows per level
// and printed only a count.
TEST(Kernelctl, PerfStopsALevelWhoseWindowAllFailedAndSaysWhy) {
  Daemon d;
  ASSERT_TRUE(d.ok()) << d.Log();
  char tmpl[] = "/tmp/kernelctl-perf-XXXXXX";
  ASSERT_NE(mkdtemp(tmpl), nullptr);
  const std::string json = std::string(tmpl) + "/perf.json";
  std::string out;
  EXPECT_EQ(Ctl("--target " + d.target() +
                    " perf scale --shape 16 --concurrency 1,2 --window-ms 200 --max-windows 10 "
                    "--json " +
                    json,
                &out),
            1)
      << out;
  EXPECT_TRUE(Has(out,
                  "every request of window 1 failed, level stopped: INVALID_ARGUMENT: "
                  "scale: missing required attr 'factor'"))
      << out;
  // The same request fails at any load: no second level.
  EXPECT_TRUE(Has(out, "INVALID_ARGUMENT fails at any load; no further levels")) << out;
  EXPECT_FALSE(Has(out, "c=2")) << out;
  std::ifstream f(json);
  std::stringstream ss;
  ss << f.rdbuf();
  EXPECT_TRUE(Has(ss.str(), "\"windows\":1,")) << ss.str();
  EXPECT_TRUE(Has(ss.str(), "\"stopped_on\":\"INVALID_ARGUMENT\"")) << ss.str();
  std::system(("rm -rf " + std::string(tmpl)).c_str());
  EXPECT_EQ(d.Terminate(), 0);
}

// Every op the daemon lists runs with `kernelctl run OP --shape S` alone:
// the inputs follow the schema (probabilities that sum to 1, positions
// inside the cache, the cache and gemm's b sized from the other inputs).
// Required attrs get a value of their type; nothing else is given.
TEST(Kernelctl, EveryOpRunsWithItsShapeAlone) {
  Daemon d;
  ASSERT_TRUE(d.ok()) << d.Log();
  v1::ListKernelsResponse lk;
  ASSERT_TRUE(d.client().ListKernels(&lk).ok());
  ASSERT_GT(lk.kernels_size(), 5);
  // A shape each op's rules accept; others take 4x64.
  const std::map<std::string, std::string> shapes = {
      {"rope", "4x8x64"},
      {"top_k_top_p_sampling", "4x1000"},
      {"min_p_sampling", "4x1000"},
      {"gemm", "8x16"},
      // The attention ops' first inputs are [tokens, heads, head_dim].
      {"batch_decode_paged", "4x8x64"},
      {"batch_prefill_paged", "16x8x64"},
      {"batch_prefill_ragged", "16x8x64"},
      {"append_paged_kv_cache", "16x2x64"},
      {"merge_state", "4x8x64"},
  };
  for (const auto& k : lk.kernels()) {
    auto it = shapes.find(k.name());
    std::string args =
        " run " + k.name() + " --shape " + (it == shapes.end() ? "4x64" : it->second);
    for (const auto& a : k.attrs()) {
      if (!a.required()) continue;
      args += " --attr " + a.name() + "=" +
              (a.type() == "float"  ? "0.5"
               : a.type() == "int"  ? "1"
               : a.type() == "bool" ? "true"
                                    : "x");
    }
    std::string out;
    EXPECT_EQ(Ctl("--target " + d.target() + args, &out), 0) << args << ": " << out;
  }
  // Where there is a reference, the values are right too.
  for (const char* args :
       {" run rope --shape 4x8x64 --check",
        " run rope --shape 3x2x16 --check "
        "--attr is_neox=false",
        " run gemm --shape 8x16 --check", " run gemm --shape 8x16 --attr transpose_b=true --check",
        " run batch_decode_paged --shape 3x4x32 --check",
        " run batch_prefill_paged --shape 16x8x64 --attr causal=true --check",
        " run batch_prefill_ragged --shape 9x2x16 --check",
        " run append_paged_kv_cache --shape 16x2x64 --check",
        " run merge_state --shape 4x8x64 --check"}) {
    std::string out;
    EXPECT_EQ(Ctl("--target " + d.target() + args, &out), 0) << args << ": " << out;
    EXPECT_TRUE(Has(out, "PASS")) << args << ": " << out;
    EXPECT_FALSE(Has(out, "FAIL")) << args << ": " << out;
  }
  EXPECT_EQ(d.Terminate(), 0);
}

}  // namespace
}  // namespace kerneld::testing
