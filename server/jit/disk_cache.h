// The JIT's disk cache: one file per key, shared by every daemon of a user.
//
//   <dir>/<key>.kjit        an entry (cache_entry.h: header + checksum)
//   <dir>/locks/<xx>        flock stripes, xx = the key's first two digits
//   <dir>/.tmp.*            entries being written
//
// Writes go to a temporary file renamed over the entry (atomic: a reader
// sees the old file or the new one). A daemon compiles a key holding its
// stripe's flock and looks again once it has it, so two daemons starting
// together compile a kernel once. A read checks the checksum and the key; a
// bad entry is removed and rebuilt. The size cap evicts the least recently
// used entries (mtime, touched on every hit). The directory must belong to
// the daemon's user and be writable by no one else: its files become code
// on the GPU.
#pragma once

#include <cstdint>
#include <functional>
#include <mutex>
#include <string>
#include <vector>

#include "jit/compiler.h"
#include "kerneld/status.h"

namespace kerneld::server::jit {

// $XDG_CACHE_HOME/kerneld/jit, else $HOME/.cache/kerneld/jit; "" when
// neither variable is set.
std::string DefaultCacheDir();

struct CacheOptions {
  std::string dir;                       // "" -> DefaultCacheDir()
  int64_t max_bytes = int64_t{1} << 30;  // the size cap; 0: none
};

class DiskCache {
 public:
  explicit DiskCache(CacheOptions opts);

  // Creates the directory (0700) and checks that the daemon can write there
  // and that no other user can. On failure the cache is off, with the
  // returned reason in reason(): lookups miss, nothing is stored, and
  // GetOrCompile still compiles (in memory).
  Status Open();
  bool enabled() const { return enabled_; }
  const std::string& dir() const { return dir_; }
  const std::string& reason() const { return reason_; }

  // The verified entry of `key`; false when there is none, or when it is
  // corrupt (it is then removed and counted in Stats().corrupt). A hit
  // marks the entry used (LRU).
  bool Load(const std::string& key, CompiledModule* out);
  // Writes the entry atomically, then evicts down to the cap.
  Status Store(const std::string& key, const CompiledModule& module);

  // Load; on a miss, under the key's lock, Load again (another daemon may
  // have compiled it meanwhile), else compile and Store. A Store that fails
  // leaves the module to the caller and the error in last_store_error().
  // Counts hits, misses, compiles and compile seconds (Stats()).
  Status GetOrCompile(const std::string& key, const std::function<Status(CompiledModule*)>& compile,
                      CompiledModule* out, bool* hit = nullptr);
  std::string last_store_error() const;

  struct EntryInfo {
    std::string key;
    int64_t bytes = 0;
    int64_t used_ns = 0;  // mtime: written or last hit
  };
  // Every entry, least recently used first.
  std::vector<EntryInfo> List() const;
  // Removes entries, least recently used first, until the cache fits the
  // cap (never `keep`); removes temporary files left by crashed writers.
  // Updates Stats().entries and .bytes.
  void Evict(const std::string& keep = "");

  std::string EntryPath(const std::string& key) const;

 private:
  int LockKey(const std::string& key) const;  // a locked fd, or -1

  CacheOptions opts_;
  std::string dir_, reason_;
  bool enabled_ = false;
  mutable std::mutex mu_;
  std::string last_store_error_;
};

// Whether `key` is what MakeKey makes (64 lowercase hex digits): only such
// names become paths.
bool IsKey(const std::string& key);

}  // namespace kerneld::server::jit
