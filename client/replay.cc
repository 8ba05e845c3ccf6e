#include "replay.h"

#include <google/protobuf/util/json_util.h>

#include <atomic>
#include <chrono>
#include <fstream>
#include <mutex>
#include <random>
#include <thread>

#include "kerneld/v1/trace.pb.h"
#include "tensor_util.h"

namespace kerneld::client {

namespace {

v1::ExecuteRequest Build(const v1::TraceRecord& r, std::mt19937_64& rng) {
  v1::ExecuteRequest req;
  req.set_op(r.op());
  req.set_request_id(r.request_id());
  for (const auto& t : r.inputs()) {
    auto dt = ParseDType(t.dtype());
    std::vector<int64_t> shape(t.shape().begin(), t.shape().end());
    v1::Tensor& out = (*req.mutable_inputs())[t.name()];
    if (!dt) {  // a dtype the server rejected: send it as recorded, with no data
      out.set_dtype(static_cast<v1::DType>(std::atoi(t.dtype().c_str())));
      for (int64_t d : shape) out.add_shape(d);
      continue;
    }
    int64_t n = 1;
    for (int64_t d : shape) n *= d;
    if (n > (int64_t{1} << 28) || n < 0) {  // never allocate absurd sizes client-side
      out.set_dtype(static_cast<v1::DType>(static_cast<int>(*dt)));
      for (int64_t d : shape) out.add_shape(d);
      continue;
    }
    // Integers (indices, positions) small and non-negative; floats in [-2, 2).
    HostTensor h = IsFloating(*dt) ? Random(*dt, shape, rng) : Random(*dt, shape, rng, 0, 8);
    ToProto(h, &out);
  }
  for (const auto& [k, v] : r.attrs()) {
    const std::string& type = r.attr_types().count(k) ? r.attr_types().at(k) : "s";
    v1::AttrValue& a = (*req.mutable_attrs())[k];
    if (type == "f")
      a.set_f(std::strtod(v.c_str(), nullptr));
    else if (type == "i")
      a.set_i(std::strtoll(v.c_str(), nullptr, 10));
    else if (type == "b")
      a.set_b(v == "true");
    else
      a.set_s(v);
  }
  return req;
}

}  // namespace

bool Replay(KernelClient& c, const std::string& path, const ReplayOptions& opt,
            std::map<std::string, OpReplayStats>* per_op, double* seconds, std::string* error) {
  std::ifstream f(path);
  if (!f) return *error = "cannot open " + path, false;
  std::vector<v1::TraceRecord> records;
  int line_no = 0;
  for (std::string line; std::getline(f, line);) {
    ++line_no;
    if (line.empty()) continue;
    v1::TraceRecord r;
    if (!google::protobuf::util::JsonStringToMessage(line, &r).ok())
      return *error = path + ":" + std::to_string(line_no) + ": not a kerneld trace record", false;
    records.push_back(std::move(r));
  }
  std::sort(records.begin(), records.end(),
            [](const v1::TraceRecord& a, const v1::TraceRecord& b) { return a.t_ns() < b.t_ns(); });
  const int64_t t0 = records.empty() ? 0 : records.front().t_ns();
  for (const auto& r : records)
    (*per_op)[r.op()].recorded_us.push_back(static_cast<double>(r.total_ns()) / 1e3);

  std::atomic<size_t> next{0};
  std::mutex mu;
  const auto start = std::chrono::steady_clock::now();
  std::vector<std::thread> workers;
  for (int w = 0; w < std::max(1, opt.concurrency); ++w) {
    workers.emplace_back([&, w] {
      std::mt19937_64 rng(static_cast<uint64_t>(w) + 1);
      for (size_t i; (i = next.fetch_add(1)) < records.size();) {
        const auto& r = records[i];
        if (opt.speed > 0)
          std::this_thread::sleep_until(
              start + std::chrono::nanoseconds(
                          static_cast<int64_t>(static_cast<double>(r.t_ns() - t0) / opt.speed)));
        v1::ExecuteRequest req = Build(r, rng);
        v1::ExecuteResponse resp;
        auto ts = std::chrono::steady_clock::now();
        grpc::Status st = c.Execute(req, &resp);
        double us = std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - ts)
                        .count();
        std::lock_guard<std::mutex> lock(mu);
        OpReplayStats& s = (*per_op)[r.op()];
        ++s.sent;
        ++s.codes[StatusName(st.error_code())];
        s.latency_us.push_back(us);
      }
    });
  }
  for (auto& t : workers) t.join();
  *seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return true;
}

}  // namespace kerneld::client
