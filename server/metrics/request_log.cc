#include "metrics/request_log.h"

#include <fcntl.h>
#include <google/protobuf/util/json_util.h>
#include <unistd.h>

#include <cctype>
#include <cmath>
#include <cstring>
#include <sstream>

#include "kerneld/half.h"
#include "kerneld/v1/trace.pb.h"
#include "metrics/daemon_log.h"

namespace kerneld::server {

namespace {

// Bytes of s to keep under max_len, never splitting a UTF-8 sequence.
size_t CutAt(const std::string& s, size_t max_len) {
  if (s.size() <= max_len) return s.size();
  size_t n = max_len;
  while (n > 0 && (static_cast<unsigned char>(s[n]) & 0xC0) == 0x80) --n;
  return n;
}

// The same bound in JSON lines: a client cannot make one line megabytes long.
std::string JsonCut(const std::string& s, size_t max_len = kMaxLoggedString) {
  const size_t n = CutAt(s, max_len);
  return n == s.size() ? JsonEscape(s) : JsonEscape(s.substr(0, n)) + "\u2026";
}

}  // namespace

std::string TextEscape(const std::string& s, size_t max_len) {
  const size_t n = CutAt(s, max_len);
  const bool cut = n < s.size();
  std::string o;
  o.reserve(n + 8);
  for (size_t i = 0; i < n; ++i) {
    if (!AppendControlEscape(s[i], "\\x%02x", &o)) o += s[i];
  }
  if (cut) o += "\u2026";  // "…"
  return o;
}

std::string TextQuoted(const std::string& s, size_t max_len) {
  std::string o = "\"";
  for (char c : TextEscape(s, max_len)) {
    if (c == '"') o += '\\';
    o += c;
  }
  return o + "\"";
}

std::string TextValue(const std::string& s, size_t max_len) {
  const std::string e = TextEscape(s, max_len);
  if (!e.empty() && e.find_first_of(" =\"") == std::string::npos) return e;
  return TextQuoted(s, max_len);
}

std::string TextKey(const std::string& k) {
  std::string o;
  for (char c : k.substr(0, CutAt(k, kMaxLoggedString))) {
    const auto u = static_cast<unsigned char>(c);
    if (std::isalnum(u) || c == '_' || c == '-' || c == '.' || u >= 0x80) {
      o += c;
    } else {
      char b[8];
      std::snprintf(b, sizeof b, "\\x%02x", u);
      o += b;
    }
  }
  return o.empty() ? "\"\"" : o;
}

namespace {

std::string Tensors(const std::vector<TensorView>* vs, const OpDef* op, bool inputs, bool json) {
  std::ostringstream os;
  if (vs == nullptr || op == nullptr) return json ? "[]" : "";
  if (json) os << "[";
  for (size_t i = 0; i < vs->size(); ++i) {
    const TensorView& v = (*vs)[i];
    const std::string& name = inputs ? op->inputs[i].name : op->outputs[i].name;
    if (json) {
      os << (i ? "," : "") << "{\"name\":\"" << name << "\",\"dtype\":\"" << DTypeName(v.dtype)
         << "\",\"shape\":" << ShapeToString(v.shape) << "}";
    } else {
      os << " " << (inputs ? "in:" : "out:") << name << "=" << DTypeName(v.dtype)
         << ShapeToString(v.shape);
    }
  }
  if (json) os << "]";
  return os.str();
}

std::string Attrs(const AttrMap* a, bool json) {
  std::ostringstream os;
  if (json) os << "{";
  bool first = true;
  if (a != nullptr)
    for (const auto& [k, v] : *a) {
      if (json) {
        std::string val = AttrValueToString(v);
        if (std::holds_alternative<std::string>(v))
          val = "\"" + JsonCut(std::get<std::string>(v)) + "\"";
        else if (val == "nan" || val == "-nan" || val == "inf" || val == "-inf")
          val = "\"" + val + "\"";  // JSON has no NaN or Inf
        os << (first ? "" : ",") << "\"" << JsonCut(k) << "\":" << val;
      } else {
        os << " " << TextKey(k) << "="
           << (std::holds_alternative<std::string>(v) ? TextQuoted(std::get<std::string>(v))
                                                      : TextValue(AttrValueToString(v)));
      }
      first = false;
    }
  if (json) os << "}";
  return os.str();
}

// min, max, NaN and Inf counts of a host-visible output.
std::string Stats(const TensorView& v, bool json) {
  if (!v.device.is_cpu() || v.data == nullptr)
    return json ? "{\"stats\":\"device-resident\"}" : "stats=device-resident";
  double mn = INFINITY, mx = -INFINITY;
  int64_t nan = 0, inf = 0;
  const int64_t n = v.numel();
  for (int64_t i = 0; i < n; ++i) {
    double x;
    const char* p = static_cast<const char*>(v.raw()) + i * static_cast<int64_t>(ItemSize(v.dtype));
    switch (v.dtype) {
      case DType::kFloat16: {
        uint16_t h;
        std::memcpy(&h, p, 2);
        x = HalfToFloat(h);
        break;
      }
      case DType::kBFloat16: {
        uint16_t h;
        std::memcpy(&h, p, 2);
        x = BFloat16ToFloat(h);
        break;
      }
      case DType::kFloat32: {
        float f;
        std::memcpy(&f, p, 4);
        x = f;
        break;
      }
      case DType::kFloat64:
        std::memcpy(&x, p, 8);
        break;
      case DType::kInt32: {
        int32_t q;
        std::memcpy(&q, p, 4);
        x = q;
        break;
      }
      case DType::kInt64: {
        int64_t q;
        std::memcpy(&q, p, 8);
        x = static_cast<double>(q);
        break;
      }
      default:
        x = static_cast<unsigned char>(*p);
    }
    if (std::isnan(x)) {
      ++nan;
      continue;
    }
    if (std::isinf(x)) {
      ++inf;
      continue;
    }  // min/max over finite values: JSON has no Inf
    mn = std::min(mn, x);
    mx = std::max(mx, x);
  }
  char b[160];
  if (mn > mx) mn = mx = 0;  // no finite element
  if (json)
    std::snprintf(b, sizeof b, "{\"min\":%.6g,\"max\":%.6g,\"nan\":%lld,\"inf\":%lld}", mn, mx,
                  static_cast<long long>(nan), static_cast<long long>(inf));
  else
    std::snprintf(b, sizeof b, "min=%.6g max=%.6g nan=%lld inf=%lld", mn, mx,
                  static_cast<long long>(nan), static_cast<long long>(inf));
  return b;
}

}  // namespace

RequestLog::RequestLog(int level, bool json, const std::string& file) : level_(level), json_(json) {
  if (!file.empty()) {
    fd_ = open(file.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
    own_fd_ = fd_ >= 0;
  }
}

RequestLog::~RequestLog() {
  if (own_fd_) close(fd_);
}

void RequestLog::Write(const std::string& line) {
  // One write per line: O_APPEND / stderr writes of a line do not interleave.
  ssize_t r = write(fd_, line.data(), line.size());
  (void)r;
}

namespace {
// Every JSON line opens with the time and a level (docs/metrics.md).
std::string JsonHead(LogLevel level) {
  return "{\"ts\":\"" + LogTimestamp() + "\",\"level\":\"" + LogLevelName(level) + "\",";
}

// A request the daemon failed (not one the client got wrong) is an error.
LogLevel RequestLevel(const std::string& code) {
  return code == "INTERNAL" || code == "UNKNOWN" || code == "DATA_LOSS" ? LogLevel::kError
                                                                        : LogLevel::kInfo;
}

// The caller's principal in a log line: who did it, for the operator.
std::string PrincipalField(const std::string& p, bool json) {
  if (p.empty()) return "";
  return json ? ",\"principal\":\"" + JsonCut(p) + "\"" : " principal=" + TextValue(p);
}
}  // namespace

void RequestLog::Start(const RequestRecord& r) {
  if (level_ < 3) return;
  if (json_) {
    Write(JsonHead(LogLevel::kDebug) + "\"event\":\"start\",\"id\":\"" + JsonCut(r.request_id) +
          "\",\"op\":\"" + JsonCut(r.op) + "\",\"backend\":\"" + JsonEscape(r.backend) +
          "\",\"device\":\"" + JsonEscape(r.device) +
          "\",\"inputs\":" + Tensors(r.inputs, r.opdef, true, true) +
          ",\"attrs\":" + Attrs(r.attrs, true) + PrincipalField(r.principal, true) + "}\n");
  } else {
    Write("kerneld: start id=" + TextValue(r.request_id) + " op=" + TextValue(r.op) +
          " backend=" + TextValue(r.backend) + " device=" + TextValue(r.device) +
          Tensors(r.inputs, r.opdef, true, false) + Attrs(r.attrs, false) +
          PrincipalField(r.principal, false) + "\n");
  }
}

void RequestLog::Finish(const RequestRecord& r) {
  if (level_ < 1) return;
  std::string line;
  const long long us = static_cast<long long>(r.total_ns / 1000);
  if (json_) {
    line = JsonHead(RequestLevel(r.code)) + "\"event\":\"request\",\"id\":\"" +
           JsonCut(r.request_id) + "\",\"op\":\"" + JsonCut(r.op) + "\",\"backend\":\"" +
           JsonEscape(r.backend) + "\",\"device\":\"" + JsonEscape(r.device) + "\",\"code\":\"" +
           r.code + "\",\"total_us\":" + std::to_string(us) +
           ",\"queue_us\":" + std::to_string(r.queue_ns / 1000) +
           ",\"execute_us\":" + std::to_string(r.execute_ns / 1000);
    if (!r.message.empty()) line += ",\"error\":\"" + JsonCut(r.message, kMaxLoggedMessage) + "\"";
    if (level_ >= 3) line += ",\"outputs\":" + Tensors(r.outputs, r.opdef, false, true);
    if (level_ >= 5 && r.outputs && r.code == "OK") {
      line += ",\"output_stats\":{";
      for (size_t i = 0; i < r.outputs->size(); ++i)
        line +=
            (i ? ",\"" : "\"") + r.opdef->outputs[i].name + "\":" + Stats((*r.outputs)[i], true);
      line += "}";
    }
    line += PrincipalField(r.principal, true) + "}\n";
  } else {
    line = "kerneld: request id=" + TextValue(r.request_id) + " op=" + TextValue(r.op) +
           " backend=" + TextValue(r.backend) + " device=" + TextValue(r.device) +
           " code=" + TextValue(r.code) + " total_us=" + std::to_string(us);
    if (level_ >= 3) line += Tensors(r.outputs, r.opdef, false, false);
    if (level_ >= 5 && r.outputs && r.code == "OK")
      for (size_t i = 0; i < r.outputs->size(); ++i)
        line += " " + r.opdef->outputs[i].name + ":" + Stats((*r.outputs)[i], false);
    line += PrincipalField(r.principal, false);
    if (!r.message.empty()) line += " error=" + TextValue(r.message, kMaxLoggedMessage);
    line += "\n";
  }
  Write(line);
}

TraceWriter::TraceWriter(const std::string& path, double sample_rate) : rate_(sample_rate) {
  fd_ = open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd_ < 0) {
    error_ = "cannot open --trace_file " + path + ": " + std::strerror(errno);
    return;
  }
  start_ns_ = std::chrono::duration_cast<std::chrono::nanoseconds>(
                  std::chrono::steady_clock::now().time_since_epoch())
                  .count();
  thread_ = std::thread([this] { Loop(); });
}

TraceWriter::~TraceWriter() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
  if (fd_ >= 0) close(fd_);
}

bool TraceWriter::Sample() {
  if (fd_ < 0 || rate_ <= 0) return false;
  if (rate_ >= 1) return true;
  // Deterministic systematic sampling: every 1/rate-th request.
  const uint64_t n = seen_.fetch_add(1, std::memory_order_relaxed);
  return static_cast<uint64_t>(static_cast<double>(n + 1) * rate_) !=
         static_cast<uint64_t>(static_cast<double>(n) * rate_);
}

void TraceWriter::Record(const v1::ExecuteRequest& req, const v1::ExecuteResponse& resp,
                         int64_t arrival_ns, const std::string& principal) {
  v1::TraceRecord t;
  t.set_principal(principal);
  t.set_t_ns(arrival_ns - start_ns_);
  t.set_request_id(req.request_id());
  t.set_op(req.op());
  auto add = [](const google::protobuf::Map<std::string, v1::Tensor>& m,
                google::protobuf::RepeatedPtrField<v1::TraceTensor>* out) {
    for (const auto& [name, tensor] : m) {
      v1::TraceTensor* tt = out->Add();
      tt->set_name(name);
      int dt = tensor.dtype();
      tt->set_dtype(dt > 0 && dt <= kMaxDType ? std::string(DTypeName(static_cast<DType>(dt)))
                                              : std::to_string(dt));
      for (int64_t d : tensor.shape()) tt->add_shape(d);
      tt->set_path(tensor.has_buffer() ? "buffer" : "inline");
    }
  };
  add(req.inputs(), t.mutable_inputs());
  add(resp.outputs(), t.mutable_outputs());
  for (const auto& [k, v] : req.attrs()) {
    switch (v.value_case()) {
      case v1::AttrValue::kF: {
        std::ostringstream os;
        os.precision(17);
        os << v.f();
        (*t.mutable_attrs())[k] = os.str();
        (*t.mutable_attr_types())[k] = "f";
        break;
      }
      case v1::AttrValue::kI:
        (*t.mutable_attrs())[k] = std::to_string(v.i());
        (*t.mutable_attr_types())[k] = "i";
        break;
      case v1::AttrValue::kB:
        (*t.mutable_attrs())[k] = v.b() ? "true" : "false";
        (*t.mutable_attr_types())[k] = "b";
        break;
      default:
        (*t.mutable_attrs())[k] = v.s();
        (*t.mutable_attr_types())[k] = "s";
        break;
    }
  }
  t.set_backend(resp.info().backend());
  t.set_device(resp.info().device());
  t.set_code(std::string(StatusCodeName(static_cast<StatusCode>(resp.status().code()))));
  t.set_queue_ns(resp.info().queue_ns());
  t.set_execute_ns(resp.info().execute_ns());
  t.set_total_ns(resp.info().total_ns());
  t.set_decoded_ns(resp.info().decoded_ns());
  t.set_scheduled_ns(resp.info().scheduled_ns());
  t.set_dequeued_ns(resp.info().dequeued_ns());
  t.set_launched_ns(resp.info().launched_ns());
  t.set_kernel_done_ns(resp.info().kernel_done_ns());
  t.set_completed_ns(resp.info().completed_ns());
  std::string line;
  google::protobuf::util::JsonPrintOptions opt;
  opt.preserve_proto_field_names = true;
  (void)google::protobuf::util::MessageToJsonString(t, &line, opt);
  line += "\n";
  {
    std::lock_guard<std::mutex> lock(mu_);
    lines_.push_back(std::move(line));
  }
  cv_.notify_one();
}

void TraceWriter::Loop() {
  std::unique_lock<std::mutex> lock(mu_);
  for (;;) {
    cv_.wait(lock, [this] { return stop_ || !lines_.empty(); });
    if (lines_.empty() && stop_) return;
    std::deque<std::string> batch;
    batch.swap(lines_);
    lock.unlock();
    std::string buf;
    for (auto& l : batch) buf += l;
    for (size_t off = 0; off < buf.size();) {
      ssize_t w = write(fd_, buf.data() + off, buf.size() - off);
      if (w <= 0) break;
      off += static_cast<size_t>(w);
    }
    lock.lock();
  }
}

}  // namespace kerneld::server
