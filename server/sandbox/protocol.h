// The daemon <-> sandbox worker wire: frames on a unix stream socketpair,
// each a fixed header and a bounded payload. The daemon reads every reply
// through Reader, bounds-checked: a worker is running a client's code on
// the GPU and its bytes are not trusted beyond their frame.
#pragma once

#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>

#include "kerneld/status.h"

namespace kerneld::server::sandbox {

enum class Frame : uint32_t {
  kPing = 1,   // -> kReply OK "pong <pid>"
  kRun = 2,    // a launch (worker_cuda.cc's RunRequest) -> kReply
  kReply = 3,  // int32 code, string message
  // EvaluateKernel's timing: int32 reps, then a kRun payload; the launch is
  // timed as kernel_bench times (kerneld/gpu_timing.h) -> kReply OK with
  // the median microseconds as its message ("12.345").
  kBench = 4,
};

inline constexpr uint32_t kFrameMagic = 0x6b64736bu;     // "kdsk"
inline constexpr uint32_t kMaxRequestBytes = 64u << 20;  // a run carries its CUBIN
inline constexpr uint32_t kMaxReplyBytes = 4096;

struct FrameHeader {
  uint32_t magic = kFrameMagic;
  uint32_t kind = 0;
  uint32_t size = 0;  // payload bytes that follow
  uint32_t reserved = 0;
};

// Appends little-endian fields (the two ends are the same binary).
class Writer {
 public:
  template <typename T>
  Writer& Put(const T& v) {
    out_.append(reinterpret_cast<const char*>(&v), sizeof(T));
    return *this;
  }
  Writer& PutString(std::string_view s) {
    Put(static_cast<uint32_t>(s.size()));
    out_.append(s.data(), s.size());
    return *this;
  }
  std::string& bytes() { return out_; }

 private:
  std::string out_;
};

// Reads what Writer wrote; any read past the end fails and stays failed.
class Reader {
 public:
  explicit Reader(std::string_view in) : in_(in) {}
  template <typename T>
  bool Get(T* v) {
    if (!ok_ || in_.size() - pos_ < sizeof(T)) return ok_ = false;
    std::memcpy(v, in_.data() + pos_, sizeof(T));
    pos_ += sizeof(T);
    return true;
  }
  bool GetString(std::string* s, uint32_t max) {
    uint32_t n = 0;
    if (!Get(&n) || n > max || in_.size() - pos_ < n) return ok_ = false;
    s->assign(in_.data() + pos_, n);
    pos_ += n;
    return true;
  }
  bool ok() const { return ok_; }
  bool done() const { return ok_ && pos_ == in_.size(); }

 private:
  std::string_view in_;
  size_t pos_ = 0;
  bool ok_ = true;
};

// Whole-frame I/O on a blocking descriptor; false on EOF or error.
bool WriteFrame(int fd, Frame kind, std::string_view payload);
bool ReadFrame(int fd, uint32_t max_bytes, Frame* kind, std::string* payload);

std::string EncodeReply(const Status& st);
Status DecodeReply(std::string_view payload);

}  // namespace kerneld::server::sandbox
