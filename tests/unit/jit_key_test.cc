// The JIT cache key: stable across processes and builds, and changed by
// each thing that changes the compiled module.
#include "jit/jit_key.h"

#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <functional>
#include <set>
#include <string>

#include "jit/compiler.h"
#include "jit/nvrtc_loader.h"
#include "jit/sha256.h"
#include "jit/source_tree.h"

namespace kerneld::server::jit {
namespace {

namespace fs = std::filesystem;

KeyParts Sample() {
  KeyParts p;
  p.program = "#include \"ops/x/cuda.cuh\"\n";
  p.headers = {{"ops/x/cuda.cuh", "#include \"common/y.cuh\"\n__global__ void K() {}\n"},
               {"common/y.cuh", "// y\n"}};
  p.toolkit_headers = {"cuda_runtime.h"};
  p.name_expressions = {"K<__half, 4096>"};
  p.options = {"-std=c++20", "--gpu-architecture=sm_90"};
  p.arch = "sm_90";
  p.nvrtc_version = "13.0";
  p.toolkit_version = "13000";
  return p;
}

TEST(JitKey, Sha256OfKnownInputs) {
  // FIPS 180-2's test vectors.
  EXPECT_EQ(Sha256::Hex(Sha256::Of("")),
            "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
  EXPECT_EQ(Sha256::Hex(Sha256::Of("abc")),
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
}

// The same inputs give the same key in every run and every build: the
// bytes hashed are fixed (a change here orphans every cache on disk, so it
// must be deliberate: bump kerneld-jit-key-v1 in jit_key.cc).
TEST(JitKey, StableAcrossRuns) {
  const std::string key = MakeKey(Sample());
  EXPECT_EQ(key, "269b825d1af5a09aab7020c3640b628e92932b23c0508a2ebbb02d3dfd47633e");
  EXPECT_EQ(MakeKey(Sample()), key);
}

TEST(JitKey, ChangesWithEachComponent) {
  const std::string base = MakeKey(Sample());
  const std::vector<std::pair<const char*, std::function<void(KeyParts&)>>> edits = {
      {"program", [](KeyParts& p) { p.program += " "; }},
      {"kernel source", [](KeyParts& p) { p.headers["ops/x/cuda.cuh"] += "\n"; }},
      {"an included header", [](KeyParts& p) { p.headers["common/y.cuh"] = "// z\n"; }},
      {"a header's name",
       [](KeyParts& p) {
         p.headers["common/z.cuh"] = p.headers["common/y.cuh"];
         p.headers.erase("common/y.cuh");
       }},
      {"a header more", [](KeyParts& p) { p.headers["common/w.cuh"] = ""; }},
      {"toolkit header", [](KeyParts& p) { p.toolkit_headers.push_back("cuda_fp16.h"); }},
      {"template argument", [](KeyParts& p) { p.name_expressions = {"K<__half, 8192>"}; }},
      {"dtype", [](KeyParts& p) { p.name_expressions = {"K<__nv_bfloat16, 4096>"}; }},
      {"a kernel more", [](KeyParts& p) { p.name_expressions.push_back("K<float, 4096>"); }},
      {"option", [](KeyParts& p) { p.options.push_back("--use_fast_math"); }},
      {"option order", [](KeyParts& p) { std::swap(p.options[0], p.options[1]); }},
      {"arch", [](KeyParts& p) { p.arch = "sm_100"; }},
      {"nvrtc version", [](KeyParts& p) { p.nvrtc_version = "13.1"; }},
      {"toolkit version", [](KeyParts& p) { p.toolkit_version = "13010"; }},
      // Moving bytes between fields must not give the same stream.
      {"field boundary", [](KeyParts& p) { p.options = {"-std=c++20--gpu-architecture=sm_90"}; }},
  };
  std::set<std::string> seen = {base};
  for (const auto& [what, edit] : edits) {
    KeyParts p = Sample();
    edit(p);
    const std::string k = MakeKey(p);
    EXPECT_NE(k, base) << what;
    EXPECT_TRUE(seen.insert(k).second) << what << " collided with another edit";
  }
}

const NvrtcApi* Nvrtc() {
  std::string why;
  const NvrtcApi* api = LoadNvrtc("", &why);
  if (api == nullptr) std::fprintf(stderr, "%s\n", why.c_str());
  return api;
}

KernelSpec RmsNormSpec() {
  return {
      "ops/rmsnorm/cuda.cuh", {"kerneld::cuda::rmsnorm::RmsNormKernel<__half, 8, 2>"}, "sm_90", {}};
}

// A whole program's key, from the embedded headers, is the same in another
// process (nothing address- or order-dependent goes in).
TEST(JitKey, ProgramKeyIsTheSameInAnotherProcess) {
  const NvrtcApi* api = Nvrtc();
  if (api == nullptr) GTEST_SKIP() << "libnvrtc not found (see above)";
  Compiler c(api, &SourceTree::Embedded());
  Program prog;
  ASSERT_TRUE(c.Prepare(RmsNormSpec(), &prog).ok());
  int fds[2];
  ASSERT_EQ(pipe(fds), 0);
  const pid_t pid = fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    Program p2;
    const bool ok = c.Prepare(RmsNormSpec(), &p2).ok();
    const std::string k = ok ? p2.key : "failed";
    (void)!write(fds[1], k.data(), k.size());
    _exit(0);
  }
  close(fds[1]);
  std::string child;
  char buf[128];
  for (ssize_t n; (n = read(fds[0], buf, sizeof(buf))) > 0;)
    child.append(buf, static_cast<size_t>(n));
  close(fds[0]);
  int status = 0;
  waitpid(pid, &status, 0);
  EXPECT_EQ(child, prog.key);
}

// Through the compiler: a header deep in the include graph, a template
// argument, an option, the arch and the NVRTC version each change the key.
TEST(JitKey, CompilerKeyFollowsSourcesAndSettings) {
  const NvrtcApi* api = Nvrtc();
  if (api == nullptr) GTEST_SKIP() << "libnvrtc not found (see above)";
  // A copy of the headers rmsnorm needs, in a directory tree.
  const fs::path root = fs::temp_directory_path() / ("jit_key_test." + std::to_string(getpid()));
  SourceClosure closure;
  ASSERT_TRUE(CollectSources(SourceTree::Embedded(), "ops/rmsnorm/cuda.cuh", &closure).ok());
  for (const auto& [name, text] : closure.headers) {
    if (StdShims().count(name)) continue;
    fs::create_directories((root / name).parent_path());
    std::ofstream(root / name, std::ios::binary) << text;
  }
  const SourceTree tree = SourceTree::Directory(root.string());
  auto key = [&](const KernelSpec& spec, const NvrtcApi* a) {
    Compiler c(a, &tree);
    Program p;
    Status s = c.Prepare(spec, &p);
    EXPECT_TRUE(s.ok()) << s.ToString();
    return p.key;
  };
  const std::string base = key(RmsNormSpec(), api);
  Program embedded;
  ASSERT_TRUE(Compiler(api, &SourceTree::Embedded()).Prepare(RmsNormSpec(), &embedded).ok());
  EXPECT_EQ(base, embedded.key) << "the same bytes from a directory give the same key";

  std::ofstream(root / "common/cuda/block_reduce.cuh", std::ios::app) << "\n// edited\n";
  const std::string edited = key(RmsNormSpec(), api);
  EXPECT_NE(edited, base) << "a header two includes deep";

  KernelSpec s = RmsNormSpec();
  s.kernels = {"kerneld::cuda::rmsnorm::RmsNormKernel<__half, 8, 4>"};
  EXPECT_NE(key(s, api), edited) << "template argument";
  s = RmsNormSpec();
  s.options = {"-DKERNELD_JIT_TEST=1"};
  EXPECT_NE(key(s, api), edited) << "option";
  s = RmsNormSpec();
  s.arch = "sm_90a";
  EXPECT_NE(key(s, api), edited) << "arch";
  NvrtcApi other = *api;
  other.minor += 1;
  EXPECT_NE(key(RmsNormSpec(), &other), edited) << "nvrtc version";
  fs::remove_all(root);
}

}  // namespace
}  // namespace kerneld::server::jit
