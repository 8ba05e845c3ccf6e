#include "jit/disk_cache.h"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <filesystem>

#include "jit/cache_entry.h"
#include "jit/jit_stats.h"

namespace kerneld::server::jit {

namespace {

namespace fs = std::filesystem;

constexpr const char* kSuffix = ".kjit";
constexpr const char* kTmpPrefix = ".tmp.";
// A temporary file this old belongs to a writer that died.
constexpr auto kOrphanAge = std::chrono::hours(1);

std::string Errno(int e) { return std::strerror(e); }

class Fd {
 public:
  explicit Fd(int fd = -1) : fd_(fd) {}
  ~Fd() {
    if (fd_ >= 0) close(fd_);
  }
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
  int get() const { return fd_; }

 private:
  int fd_;
};

bool ReadAll(int fd, std::string* out) {
  struct stat st {};
  if (fstat(fd, &st) != 0) return false;
  out->clear();
  out->reserve(static_cast<size_t>(st.st_size));
  char buf[1 << 16];
  for (;;) {
    const ssize_t n = read(fd, buf, sizeof(buf));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return false;
    if (n == 0) return true;
    out->append(buf, static_cast<size_t>(n));
  }
}

bool WriteAll(int fd, const std::string& s) {
  size_t off = 0;
  while (off < s.size()) {
    const ssize_t n = write(fd, s.data() + off, s.size() - off);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    off += static_cast<size_t>(n);
  }
  return true;
}

int64_t MtimeNs(const struct stat& st) {
  return int64_t{st.st_mtim.tv_sec} * 1000000000 + st.st_mtim.tv_nsec;
}

}  // namespace

std::string DefaultCacheDir() {
  if (const char* x = std::getenv("XDG_CACHE_HOME"); x != nullptr && x[0] == '/')
    return std::string(x) + "/kerneld/jit";
  if (const char* h = std::getenv("HOME"); h != nullptr && h[0] != '\0')
    return std::string(h) + "/.cache/kerneld/jit";
  return "";
}

bool IsKey(const std::string& key) {
  return key.size() == 64 && std::all_of(key.begin(), key.end(), [](char c) {
           return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f');
         });
}

DiskCache::DiskCache(CacheOptions opts) : opts_(std::move(opts)) {
  dir_ = opts_.dir.empty() ? DefaultCacheDir() : opts_.dir;
}

Status DiskCache::Open() {
  enabled_ = false;
  auto off = [this](std::string why) {
    reason_ = "JIT cache directory " + Quote(dir_) + " " + why +
              ": the cache is off, compiled kernels are kept in memory only";
    return Status(StatusCode::kFailedPrecondition, reason_);
  };
  if (dir_.empty()) {
    reason_ =
        "no JIT cache directory (neither $XDG_CACHE_HOME nor $HOME is set; see --jit_cache_dir)"
        ": the cache is off, compiled kernels are kept in memory only";
    return {StatusCode::kFailedPrecondition, reason_};
  }
  std::error_code ec;
  const bool created = fs::create_directories(dir_, ec);
  if (ec) return off("cannot be created (" + ec.message() + ")");
  if (created) fs::permissions(dir_, fs::perms::owner_all, fs::perm_options::replace, ec);
  struct stat st {};
  if (stat(dir_.c_str(), &st) != 0) return off("cannot be read (" + Errno(errno) + ")");
  if (!S_ISDIR(st.st_mode)) return off("is not a directory");
  if (st.st_uid != geteuid())
    return off("belongs to uid " + std::to_string(st.st_uid) + ", not to this daemon's uid " +
               std::to_string(geteuid()));
  if ((st.st_mode & (S_IWGRP | S_IWOTH)) != 0)
    return off("is writable by other users (its entries become GPU code; chmod go-w it)");
  fs::create_directories(fs::path(dir_) / "locks", ec);
  if (ec) return off("cannot hold its locks directory (" + ec.message() + ")");
  // Writable? A probe file, created and removed the way entries are.
  const std::string probe = dir_ + "/" + kTmpPrefix + "probe." + std::to_string(getpid());
  Fd fd(open(probe.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600));
  if (fd.get() < 0) return off("is not writable (" + Errno(errno) + ")");
  unlink(probe.c_str());
  enabled_ = true;
  reason_.clear();
  Evict();  // counts what is there; applies a cap lowered since the last run
  return Status::Ok();
}

std::string DiskCache::EntryPath(const std::string& key) const {
  return dir_ + "/" + key + kSuffix;
}

int DiskCache::LockKey(const std::string& key) const {
  const std::string path = dir_ + "/locks/" + key.substr(0, 2);
  const int fd = open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0600);
  if (fd < 0) return -1;
  while (flock(fd, LOCK_EX) != 0) {
    if (errno != EINTR) {
      close(fd);
      return -1;
    }
  }
  return fd;
}

bool DiskCache::Load(const std::string& key, CompiledModule* out) {
  if (!enabled_ || !IsKey(key)) return false;
  const std::string path = EntryPath(key);
  Fd fd(open(path.c_str(), O_RDONLY | O_CLOEXEC));
  if (fd.get() < 0) return false;
  std::string bytes, why;
  if (ReadAll(fd.get(), &bytes) && ParseEntry(bytes, key, out, &why)) {
    utimensat(AT_FDCWD, path.c_str(), nullptr, 0);  // used now (LRU)
    return true;
  }
  // Remove it only if it is still the file read: a writer may have renamed
  // a good entry over it since.
  struct stat read_st {
  }, now_st{};
  if (fstat(fd.get(), &read_st) == 0 && stat(path.c_str(), &now_st) == 0 &&
      read_st.st_ino == now_st.st_ino && read_st.st_dev == now_st.st_dev)
    unlink(path.c_str());
  Stats().corrupt.fetch_add(1, std::memory_order_relaxed);
  return false;
}

Status DiskCache::Store(const std::string& key, const CompiledModule& module) {
  if (!enabled_) return {StatusCode::kFailedPrecondition, reason_};
  if (!IsKey(key)) return InvalidArgument("not a JIT cache key: " + Quote(key));
  static std::atomic<uint64_t> seq{0};
  const std::string tmp = dir_ + "/" + kTmpPrefix + key + "." + std::to_string(getpid()) + "." +
                          std::to_string(seq.fetch_add(1));
  const std::string bytes = SerializeEntry(key, module);
  {
    Fd fd(open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600));
    if (fd.get() < 0) return Internal("JIT cache: cannot create " + tmp + ": " + Errno(errno));
    if (!WriteAll(fd.get(), bytes)) {
      const int e = errno;
      unlink(tmp.c_str());
      return Internal("JIT cache: cannot write " + tmp + ": " + Errno(e));
    }
  }
  if (rename(tmp.c_str(), EntryPath(key).c_str()) != 0) {
    const int e = errno;
    unlink(tmp.c_str());
    return Internal("JIT cache: cannot rename " + tmp + " to its entry: " + Errno(e));
  }
  Evict(key);
  return Status::Ok();
}

Status DiskCache::GetOrCompile(const std::string& key,
                               const std::function<Status(CompiledModule*)>& compile,
                               CompiledModule* out, bool* hit) {
  JitStats& stats = Stats();
  if (hit != nullptr) *hit = false;
  auto hit_now = [&] {
    stats.hits.fetch_add(1, std::memory_order_relaxed);
    if (hit != nullptr) *hit = true;
    return Status::Ok();
  };
  if (Load(key, out)) return hit_now();
  const int lock = enabled_ && IsKey(key) ? LockKey(key) : -1;
  Fd lock_fd(lock);  // released when this returns (close drops the flock)
  if (lock >= 0 && Load(key, out)) return hit_now();
  stats.misses.fetch_add(1, std::memory_order_relaxed);
  const auto t0 = std::chrono::steady_clock::now();
  Status s = compile(out);
  if (!s.ok()) {
    stats.compile_failures.fetch_add(1, std::memory_order_relaxed);
    return s;
  }
  stats.compiles.fetch_add(1, std::memory_order_relaxed);
  stats.compile_seconds.Observe(
      std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
  if (enabled_) {
    if (Status st = Store(key, *out); !st.ok()) {
      stats.store_failures.fetch_add(1, std::memory_order_relaxed);
      std::lock_guard<std::mutex> g(mu_);
      last_store_error_ = st.message();
    }
  }
  return Status::Ok();
}

std::string DiskCache::last_store_error() const {
  std::lock_guard<std::mutex> g(mu_);
  return last_store_error_;
}

std::vector<DiskCache::EntryInfo> DiskCache::List() const {
  std::vector<EntryInfo> out;
  if (dir_.empty()) return out;
  std::error_code ec;
  for (fs::directory_iterator it(dir_, ec), end; !ec && it != end; it.increment(ec)) {
    const std::string name = it->path().filename().string();
    const size_t n = std::strlen(kSuffix);
    if (name.size() <= n || name.compare(name.size() - n, n, kSuffix) != 0) continue;
    const std::string key = name.substr(0, name.size() - n);
    struct stat st {};
    if (!IsKey(key) || stat(it->path().c_str(), &st) != 0 || !S_ISREG(st.st_mode)) continue;
    out.push_back({key, int64_t{st.st_size}, MtimeNs(st)});
  }
  std::sort(out.begin(), out.end(), [](const EntryInfo& a, const EntryInfo& b) {
    return a.used_ns != b.used_ns ? a.used_ns < b.used_ns : a.key < b.key;
  });
  return out;
}

void DiskCache::Evict(const std::string& keep) {
  if (!enabled_) return;
  std::vector<EntryInfo> entries = List();
  int64_t total = 0;
  for (const EntryInfo& e : entries) total += e.bytes;
  if (opts_.max_bytes > 0 && total > opts_.max_bytes) {
    // One evictor at a time across daemons; another one busy already does it.
    Fd lock(open((dir_ + "/locks/evict").c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0600));
    if (lock.get() >= 0 && flock(lock.get(), LOCK_EX | LOCK_NB) == 0) {
      entries = List();  // as of holding the lock
      total = 0;
      for (const EntryInfo& e : entries) total += e.bytes;
      for (const EntryInfo& e : entries) {
        if (total <= opts_.max_bytes) break;
        if (e.key == keep) continue;
        if (unlink(EntryPath(e.key).c_str()) == 0) {
          total -= e.bytes;
          Stats().evictions.fetch_add(1, std::memory_order_relaxed);
        }
      }
    }
  }
  int64_t count = 0;
  total = 0;
  for (const EntryInfo& e : List()) {
    ++count;
    total += e.bytes;
  }
  Stats().entries.store(count, std::memory_order_relaxed);
  Stats().bytes.store(total, std::memory_order_relaxed);
  // Temporary files of writers that died mid-write.
  std::error_code ec;
  const auto now = fs::file_time_type::clock::now();
  for (fs::directory_iterator it(dir_, ec), end; !ec && it != end; it.increment(ec)) {
    if (it->path().filename().string().rfind(kTmpPrefix, 0) != 0) continue;
    std::error_code tec;
    const auto t = fs::last_write_time(it->path(), tec);
    if (!tec && now - t > kOrphanAge) fs::remove(it->path(), tec);
  }
}

}  // namespace kerneld::server::jit
