// Request logging (--log_level, --log_format, --log_file) and workload
// capture (--trace_file, --trace_sample_rate).
//
// Levels: 0 off (costs one integer compare per request); 1 one line per
// request when it completes (op, backend, device, code, us); 3 adds a line
// before execution with input dtypes, shapes and attrs — written before the
// kernel runs, so a crash still shows the request that caused it; 5 adds
// output statistics (min, max, NaN and Inf counts) for host-visible outputs.
// Lines are written with one write() each, so concurrent requests never
// interleave within a line. JSON lines open with "ts" (RFC 3339, UTC) and
// "level" (metrics/daemon_log.h), like kerneld's other lines.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "kerneld/op.h"
#include "kerneld/v1/kerneld.pb.h"

namespace kerneld::server {

// Client strings in the text log: control bytes as \n, \r, \t or \xHH (and
// '\\' doubled), so a request can never forge a log line or send escape
// sequences to a terminal; cut to max_len bytes (on a UTF-8 boundary) + "…".
// Ids, op names and attr values keep 128 bytes; error messages, which are
// ours but may quote the client, keep 512 (a backend-by-backend refusal
// is longer than 128 and worth reading whole).
inline constexpr size_t kMaxLoggedString = 128;
inline constexpr size_t kMaxLoggedMessage = 512;
std::string TextEscape(const std::string& s, size_t max_len = kMaxLoggedString);
// A value of a text line's key=value field: TextEscape'd, and in double
// quotes (with '"' as \") when empty or holding a space, '=' or '"', so a
// client's "x code=OK principal=ops" stays one value (logfmt's quoting);
// TextQuoted always quotes (string attrs). TextKey: a client's attr name,
// bytes other than [A-Za-z0-9_.-] and UTF-8 as \xHH.
std::string TextValue(const std::string& s, size_t max_len = kMaxLoggedString);
std::string TextQuoted(const std::string& s, size_t max_len = kMaxLoggedString);
std::string TextKey(const std::string& k);

struct RequestRecord {
  std::string request_id, op, backend, device, code, message;
  std::string principal;  // who asked (docs/security.md); "" leaves it out
  int64_t t_ns = 0;       // arrival (steady clock)
  int64_t queue_ns = 0, execute_ns = 0, total_ns = 0;
  const std::vector<TensorView>* inputs = nullptr;  // schema order
  const std::vector<TensorView>* outputs = nullptr;
  const OpDef* opdef = nullptr;
  const AttrMap* attrs = nullptr;
  std::vector<bool> input_in_buffer, output_in_buffer;
};

class RequestLog {
 public:
  RequestLog(int level, bool json, const std::string& file);
  ~RequestLog();
  int level() const { return level_; }
  bool ok() const { return fd_ >= 0; }
  void Start(const RequestRecord& r);   // level >= 3
  void Finish(const RequestRecord& r);  // level >= 1 (5: with output stats)

 private:
  void Write(const std::string& line);
  int level_;
  bool json_;
  int fd_ = 2;
  bool own_fd_ = false;
};

// Appends one JSON TraceRecord line per sampled request, from a background
// thread (the request path only queues the line).
class TraceWriter {
 public:
  TraceWriter(const std::string& path, double sample_rate);
  ~TraceWriter();
  bool ok() const { return fd_ >= 0; }
  const std::string& error() const { return error_; }
  bool Sample();  // whether to record this request
  // Builds the line from the request and its (completed) response.
  void Record(const v1::ExecuteRequest& req, const v1::ExecuteResponse& resp, int64_t arrival_ns,
              const std::string& principal = "");

 private:
  void Loop();
  int fd_ = -1;
  std::string error_;
  double rate_;
  std::atomic<uint64_t> seen_{0};
  int64_t start_ns_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::string> lines_;
  bool stop_ = false;
  std::thread thread_;
};

}  // namespace kerneld::server
