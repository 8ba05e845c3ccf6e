// The JIT disk cache: atomic, locked, verified entries with an LRU size cap,
// and compiling that still works when the directory does not.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>

#include "jit/cache_entry.h"
#include "jit/compiler.h"
#include "jit/disk_cache.h"
#include "jit/jit_stats.h"
#include "jit/nvrtc_loader.h"
#include "jit/sha256.h"
#include "jit/source_tree.h"

namespace kerneld::server::jit {
namespace {

namespace fs = std::filesystem;

std::string KeyOf(const std::string& s) { return Sha256::Hex(Sha256::Of(s)); }

CompiledModule Module(const std::string& tag, size_t size = 1000) {
  CompiledModule m;
  m.cubin =
      "\x7f"
      "ELF" +
      std::string(size, 'x') + tag;
  m.symbols = {{"K<" + tag + ">", "_Z1K" + tag}};
  return m;
}

class JitCacheTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() /
           ("jit_cache_test." + std::to_string(getpid()) + "." +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
  }
  void TearDown() override {
    std::error_code ec;
    fs::permissions(dir_, fs::perms::owner_all, ec);
    fs::remove_all(dir_, ec);
  }
  std::string ReadFile(const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    std::ostringstream ss;
    ss << in.rdbuf();
    return ss.str();
  }
  void WriteFile(const std::string& path, const std::string& bytes) {
    std::ofstream(path, std::ios::binary | std::ios::trunc) << bytes;
  }
  fs::path dir_;
};

TEST_F(JitCacheTest, DefaultDirectory) {
  const char* xdg = std::getenv("XDG_CACHE_HOME");
  const char* home = std::getenv("HOME");
  const std::string old_xdg = xdg ? xdg : "", old_home = home ? home : "";
  setenv("XDG_CACHE_HOME", "/x/cache", 1);
  setenv("HOME", "/home/u", 1);
  EXPECT_EQ(DefaultCacheDir(), "/x/cache/kerneld/jit");
  unsetenv("XDG_CACHE_HOME");
  EXPECT_EQ(DefaultCacheDir(), "/home/u/.cache/kerneld/jit");
  unsetenv("HOME");
  EXPECT_EQ(DefaultCacheDir(), "");
  DiskCache none(CacheOptions{});
  Status s = none.Open();
  EXPECT_FALSE(s.ok());
  EXPECT_NE(s.message().find("--jit_cache_dir"), std::string::npos) << s.message();
  if (xdg) setenv("XDG_CACHE_HOME", old_xdg.c_str(), 1);
  if (home) setenv("HOME", old_home.c_str(), 1);
}

TEST_F(JitCacheTest, StoreThenLoad) {
  DiskCache cache({dir_.string(), 0});
  ASSERT_TRUE(cache.Open().ok()) << cache.reason();
  EXPECT_EQ(fs::status(dir_).permissions() & fs::perms::all, fs::perms::owner_all);
  const std::string key = KeyOf("a");
  CompiledModule out;
  EXPECT_FALSE(cache.Load(key, &out));
  ASSERT_TRUE(cache.Store(key, Module("a")).ok());
  ASSERT_TRUE(cache.Load(key, &out));
  EXPECT_EQ(out.cubin, Module("a").cubin);
  EXPECT_EQ(out.symbols, Module("a").symbols);
  EXPECT_EQ(Stats().entries.load(), 1);
  EXPECT_EQ(Stats().bytes.load(), static_cast<int64_t>(fs::file_size(cache.EntryPath(key))));
  // Not a key: never a path.
  EXPECT_FALSE(cache.Store("../../etc/passwd", Module("a")).ok());
  EXPECT_FALSE(cache.Load("../../etc/passwd", &out));
}

TEST_F(JitCacheTest, GetOrCompileCompilesOnceThenHits) {
  DiskCache cache({dir_.string(), 0});
  ASSERT_TRUE(cache.Open().ok());
  const std::string key = KeyOf("b");
  int compiles = 0;
  auto compile = [&](CompiledModule* m) {
    ++compiles;
    *m = Module("b");
    return Status::Ok();
  };
  const uint64_t hits0 = Stats().hits, misses0 = Stats().misses;
  const uint64_t timed0 = Stats().compile_seconds.Read().count;
  CompiledModule out;
  bool hit = true;
  ASSERT_TRUE(cache.GetOrCompile(key, compile, &out, &hit).ok());
  EXPECT_FALSE(hit);
  ASSERT_TRUE(cache.GetOrCompile(key, compile, &out, &hit).ok());
  EXPECT_TRUE(hit);
  EXPECT_EQ(compiles, 1);
  EXPECT_EQ(out.cubin, Module("b").cubin);
  EXPECT_EQ(Stats().hits - hits0, 1u);
  EXPECT_EQ(Stats().misses - misses0, 1u);
  EXPECT_EQ(Stats().compile_seconds.Read().count - timed0, 1u);
  // A second daemon (another cache object on the same directory) hits.
  DiskCache other({dir_.string(), 0});
  ASSERT_TRUE(other.Open().ok());
  ASSERT_TRUE(other.GetOrCompile(key, compile, &out, &hit).ok());
  EXPECT_TRUE(hit);
  EXPECT_EQ(compiles, 1);
  // A compile error is returned and stores nothing.
  const std::string bad = KeyOf("bad");
  Status s = cache.GetOrCompile(
      bad, [](CompiledModule*) { return Internal("no"); }, &out);
  EXPECT_EQ(s.message(), "no");
  EXPECT_FALSE(fs::exists(cache.EntryPath(bad)));
}

// Truncated, bit-flipped, emptied, another key's, or of another format: each
// is detected, removed and rebuilt; never loaded.
TEST_F(JitCacheTest, CorruptEntriesAreRebuilt) {
  DiskCache cache({dir_.string(), 0});
  ASSERT_TRUE(cache.Open().ok());
  const std::string key = KeyOf("c");
  const std::string good = SerializeEntry(key, Module("c"));
  std::string flipped = good;
  flipped[flipped.size() / 2] ^= 0x20;
  std::string header_size = good;
  header_size[8] ^= 1;
  const std::vector<std::pair<const char*, std::string>> bad = {
      {"truncated", good.substr(0, good.size() - 7)},
      {"cut in the header", good.substr(0, 20)},
      {"empty", ""},
      {"a flipped bit", flipped},
      {"a wrong size", header_size},
      {"extended", good + "junk"},
      {"another key's", SerializeEntry(KeyOf("d"), Module("c"))},
      {"not an entry", "hello"},
  };
  for (const auto& [what, bytes] : bad) {
    WriteFile(cache.EntryPath(key), bytes);
    const uint64_t corrupt0 = Stats().corrupt;
    CompiledModule out;
    EXPECT_FALSE(cache.Load(key, &out)) << what;
    EXPECT_EQ(Stats().corrupt - corrupt0, 1u) << what;
    EXPECT_FALSE(fs::exists(cache.EntryPath(key))) << what << ": removed";
    WriteFile(cache.EntryPath(key), bytes);
    int compiles = 0;
    bool hit = true;
    ASSERT_TRUE(cache
                    .GetOrCompile(
                        key,
                        [&](CompiledModule* m) {
                          ++compiles;
                          *m = Module("c");
                          return Status::Ok();
                        },
                        &out, &hit)
                    .ok());
    EXPECT_FALSE(hit) << what;
    EXPECT_EQ(compiles, 1) << what;
    EXPECT_EQ(out.cubin, Module("c").cubin) << what;
    EXPECT_EQ(ReadFile(cache.EntryPath(key)), good) << what << ": rebuilt";
  }
}

void SetUsed(const std::string& path, int64_t seconds_ago) {
  const auto t = std::chrono::system_clock::now() - std::chrono::seconds(seconds_ago);
  const int64_t s = std::chrono::duration_cast<std::chrono::seconds>(t.time_since_epoch()).count();
  struct timespec ts[2] = {{s, 0}, {s, 0}};
  ASSERT_EQ(utimensat(AT_FDCWD, path.c_str(), ts, 0), 0);
}

TEST_F(JitCacheTest, EvictsLeastRecentlyUsedUnderTheCap) {
  const int64_t entry = static_cast<int64_t>(SerializeEntry(KeyOf("k0"), Module("k0")).size());
  DiskCache cache({dir_.string(), 3 * entry});
  ASSERT_TRUE(cache.Open().ok());
  std::vector<std::string> keys;
  for (int i = 0; i < 3; ++i) {
    keys.push_back(KeyOf("k" + std::to_string(i)));
    ASSERT_TRUE(cache.Store(keys.back(), Module("k" + std::to_string(i))).ok());
    SetUsed(cache.EntryPath(keys.back()), 100 - i);  // k0 oldest
  }
  ASSERT_EQ(cache.List().size(), 3u);
  // A hit makes k0 the most recently used: k1 is now the oldest.
  CompiledModule out;
  ASSERT_TRUE(cache.Load(keys[0], &out));
  const uint64_t ev0 = Stats().evictions;
  const std::string k3 = KeyOf("k3");
  ASSERT_TRUE(cache.Store(k3, Module("k3")).ok());
  EXPECT_EQ(Stats().evictions - ev0, 1u);
  EXPECT_TRUE(fs::exists(cache.EntryPath(keys[0])));
  EXPECT_FALSE(fs::exists(cache.EntryPath(keys[1])));
  EXPECT_TRUE(fs::exists(cache.EntryPath(keys[2])));
  EXPECT_TRUE(fs::exists(cache.EntryPath(k3)));
  EXPECT_EQ(Stats().entries.load(), 3);
  EXPECT_LE(Stats().bytes.load(), 3 * entry);
  // An entry larger than the whole cap is kept (it was just made) and
  // pushes out everything else.
  const std::string big = KeyOf("big");
  ASSERT_TRUE(cache.Store(big, Module("big", 5 * static_cast<size_t>(entry))).ok());
  const auto left = cache.List();
  ASSERT_EQ(left.size(), 1u);
  EXPECT_EQ(left[0].key, big);
  // A cap lowered between runs applies when the cache opens.
  DiskCache tiny({dir_.string(), 1});
  ASSERT_TRUE(tiny.Open().ok());
  EXPECT_TRUE(tiny.List().empty());
}

// The cache directory unusable: a clear reason, and compiling still works.
TEST_F(JitCacheTest, UnusableDirectoryCompilesInMemory) {
  fs::create_directories(dir_);
  WriteFile((dir_ / "file").string(), "not a directory");
  struct Case {
    const char* what;
    std::string dir;
    const char* says;
  };
  std::vector<Case> cases = {
      {"under a file", (dir_ / "file" / "jit").string(), "cannot be created"},
      {"a file", (dir_ / "file").string(), "cannot be created"},
  };
  fs::create_directories(dir_ / "open");
  fs::permissions(dir_ / "open", fs::perms::all, fs::perm_options::replace);
  cases.push_back({"writable by others", (dir_ / "open").string(), "writable by other users"});
  if (geteuid() != 0) {  // root writes through permissions
    fs::create_directories(dir_ / "ro");
    fs::permissions(dir_ / "ro", fs::perms::owner_read | fs::perms::owner_exec,
                    fs::perm_options::replace);
    cases.push_back({"read-only", (dir_ / "ro").string(), "not writable"});
  }
  for (const Case& c : cases) {
    DiskCache cache({c.dir, 0});
    Status s = cache.Open();
    EXPECT_FALSE(s.ok()) << c.what;
    EXPECT_FALSE(cache.enabled()) << c.what;
    EXPECT_NE(s.message().find(c.says), std::string::npos) << c.what << ": " << s.message();
    EXPECT_NE(s.message().find("kept in memory only"), std::string::npos) << s.message();
    EXPECT_EQ(cache.reason(), s.message());
    int compiles = 0;
    CompiledModule out;
    bool hit = true;
    const std::string key = KeyOf("m");
    auto compile = [&](CompiledModule* m) {
      ++compiles;
      *m = Module("m");
      return Status::Ok();
    };
    ASSERT_TRUE(cache.GetOrCompile(key, compile, &out, &hit).ok()) << c.what;
    EXPECT_FALSE(hit);
    EXPECT_EQ(out.cubin, Module("m").cubin);
    EXPECT_EQ(compiles, 1);
    EXPECT_FALSE(cache.Load(key, &out));
  }
}

// Waits until `pid` is blocked on an flock (a "->" line of /proc/locks).
bool WaitBlockedOnFlock(pid_t pid) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  while (std::chrono::steady_clock::now() < deadline) {
    std::ifstream locks("/proc/locks");
    std::string line;
    while (std::getline(locks, line)) {
      std::istringstream ss(line);
      std::string n, arrow, type, adv, mode, p;
      ss >> n >> arrow >> type >> adv >> mode >> p;
      if (arrow == "->" && type == "FLOCK" && p == std::to_string(pid)) return true;
    }
    std::this_thread::yield();
  }
  return false;
}

// Two daemons miss one key at once: the second waits on the key's lock while
// the first compiles, then finds the entry. One compile, one valid entry.
TEST_F(JitCacheTest, TwoProcessesCompileOneKeyOnce) {
  DiskCache setup({dir_.string(), 0});
  ASSERT_TRUE(setup.Open().ok());
  const std::string key = KeyOf("shared");
  int events[2], go[2];
  ASSERT_EQ(pipe(events), 0);
  ASSERT_EQ(pipe(go), 0);
  auto child = [&](char name, bool wait_for_go) {
    const pid_t pid = fork();
    if (pid != 0) return pid;
    DiskCache cache({dir_.string(), 0});
    if (!cache.Open().ok()) _exit(2);
    CompiledModule out;
    bool hit = false;
    Status s = cache.GetOrCompile(
        key,
        [&](CompiledModule* m) {
          (void)!write(events[1], &name, 1);  // "compiling"
          char c;
          if (wait_for_go) (void)!read(go[0], &c, 1);
          *m = Module("shared");
          return Status::Ok();
        },
        &out, &hit);
    const char done = hit ? 'h' : 'c';
    (void)!write(events[1], &done, 1);
    _exit(s.ok() && out.cubin == Module("shared").cubin ? 0 : 1);
  };
  const pid_t a = child('A', true);
  ASSERT_GT(a, 0);
  char c = 0;
  ASSERT_EQ(read(events[0], &c, 1), 1);
  EXPECT_EQ(c, 'A');  // A holds the key's lock, compiling
  const pid_t b = child('B', false);
  ASSERT_GT(b, 0);
  EXPECT_TRUE(WaitBlockedOnFlock(b)) << "B never waited on the key's lock";
  ASSERT_EQ(write(go[1], "g", 1), 1);
  int sa = 0, sb = 0;
  waitpid(a, &sa, 0);
  waitpid(b, &sb, 0);
  EXPECT_TRUE(WIFEXITED(sa) && WEXITSTATUS(sa) == 0);
  EXPECT_TRUE(WIFEXITED(sb) && WEXITSTATUS(sb) == 0);
  close(events[1]);
  std::string rest;
  char buf[16];
  for (ssize_t n; (n = read(events[0], buf, sizeof(buf))) > 0;)
    rest.append(buf, static_cast<size_t>(n));
  // A compiled ('c'); B never compiled and hit ('h'), in either order.
  EXPECT_EQ(std::count(rest.begin(), rest.end(), 'B'), 0) << rest;
  EXPECT_EQ(std::count(rest.begin(), rest.end(), 'c'), 1) << rest;
  EXPECT_EQ(std::count(rest.begin(), rest.end(), 'h'), 1) << rest;
  CompiledModule out;
  EXPECT_TRUE(setup.Load(key, &out));
  EXPECT_EQ(setup.List().size(), 1u);
}

// Two processes storing one key as fast as they can: every read in between
// and the entry left at the end are whole, valid entries.
TEST_F(JitCacheTest, TwoProcessesStoringOneKeyLeaveAValidEntry) {
  DiskCache setup({dir_.string(), 0});
  ASSERT_TRUE(setup.Open().ok());
  const std::string key = KeyOf("race");
  int start[2];
  ASSERT_EQ(pipe(start), 0);
  std::vector<pid_t> pids;
  for (int w = 0; w < 2; ++w) {
    const pid_t pid = fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) {
      close(start[1]);
      char c;
      (void)!read(start[0], &c, 1);  // both start together (EOF)
      DiskCache cache({dir_.string(), 0});
      if (!cache.Open().ok()) _exit(2);
      int bad = 0;
      for (int i = 0; i < 200; ++i) {
        if (!cache.Store(key, Module(std::to_string(w), 20000 + 997 * static_cast<size_t>(w))).ok())
          _exit(3);
        CompiledModule out;
        if (!cache.Load(key, &out)) ++bad;  // a torn file would fail its checksum
      }
      _exit(bad == 0 ? 0 : 4);
    }
    pids.push_back(pid);
  }
  close(start[0]);
  close(start[1]);
  for (pid_t p : pids) {
    int st = 0;
    waitpid(p, &st, 0);
    EXPECT_TRUE(WIFEXITED(st) && WEXITSTATUS(st) == 0) << "exit " << WEXITSTATUS(st);
  }
  CompiledModule out;
  EXPECT_TRUE(setup.Load(key, &out));
  EXPECT_TRUE(out.cubin == Module("0", 20000).cubin || out.cubin == Module("1", 20997).cubin);
  // No temporary file is left behind.
  for (const auto& e : fs::directory_iterator(dir_))
    EXPECT_NE(e.path().filename().string().rfind(".tmp.", 0), 0u) << e.path();
}

// NVRTC through the cache: the first call compiles rmsnorm for sm_90, the
// second loads the same CUBIN from disk.
TEST_F(JitCacheTest, RealCompileIsCached) {
  std::string why;
  const NvrtcApi* api = LoadNvrtc("", &why);
  if (api == nullptr) GTEST_SKIP() << why;
  Compiler compiler(api, &SourceTree::Embedded());
  Program prog;
  ASSERT_TRUE(compiler
                  .Prepare({"ops/rmsnorm/cuda.cuh",
                            {"kerneld::cuda::rmsnorm::RmsNormKernel<float, 4, 1>"},
                            "sm_90",
                            {}},
                           &prog)
                  .ok());
  DiskCache cache({dir_.string(), 0});
  ASSERT_TRUE(cache.Open().ok());
  auto compile = [&](CompiledModule* m) { return compiler.Compile(prog, m); };
  CompiledModule first, second;
  bool hit = true;
  Status s = cache.GetOrCompile(prog.key, compile, &first, &hit);
  ASSERT_TRUE(s.ok()) << s.ToString();
  EXPECT_FALSE(hit);
  ASSERT_TRUE(cache.GetOrCompile(prog.key, compile, &second, &hit).ok());
  EXPECT_TRUE(hit);
  EXPECT_EQ(second.cubin, first.cubin);
  EXPECT_EQ(second.symbols, first.symbols);
}

}  // namespace
}  // namespace kerneld::server::jit
