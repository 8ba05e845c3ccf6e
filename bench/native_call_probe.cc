// Is libkerneld_native's call as fast as kernelctl's, from C++, with no
// Python in the process? Three ways to send the same unary Execute (scale on
// 4096 float16 inline, cpu backend), interleaved in rounds on one daemon:
//   native    kd_call_start / kd_call_wait / kd_call_data / kd_call_free, the
//             calls the Python client makes (generic async call, waited on a
//             completion queue of this thread);
//   blocking  grpc's blocking unary call on bytes (what a generated stub
//             does, without protobuf);
//   stub      the generated KernelService stub (kernelctl's way).
// Prints each variant's p50 and p99 per round. Not a test.
//
//   native_call_probe TARGET [CALLS] [ROUNDS]
#include <grpcpp/generic/generic_stub.h>
#include <grpcpp/grpcpp.h>
#include <grpcpp/impl/codegen/client_unary_call.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <string>
#include <vector>

#include "kerneld/v1/kerneld.grpc.pb.h"
#include "native/native_call.h"

namespace {

using Clock = std::chrono::steady_clock;

// f() returns (ok, the time its timed span began).
std::vector<double> Time(int n, const std::function<std::pair<bool, Clock::time_point>()>& f) {
  for (int i = 0; i < 200; ++i) f();
  std::vector<double> us;
  us.reserve(n);
  for (int i = 0; i < n; ++i) {
    auto [ok, t0] = f();
    if (!ok) {
      std::fprintf(stderr, "call failed\n");
      std::exit(1);
    }
    us.push_back(std::chrono::duration<double, std::micro>(Clock::now() - t0).count());
  }
  std::sort(us.begin(), us.end());
  return us;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: native_call_probe TARGET [CALLS] [ROUNDS]\n");
    return 2;
  }
  const std::string target = argv[1];
  const int calls = argc > 2 ? std::atoi(argv[2]) : 2000;
  const int rounds = argc > 3 ? std::atoi(argv[3]) : 3;

  kerneld::v1::ExecuteRequest req;
  req.set_op("scale");
  req.set_backend("cpu");
  (*req.mutable_attrs())["factor"].set_f(2.0);
  auto& x = (*req.mutable_inputs())["x"];
  x.set_dtype(kerneld::v1::DTYPE_FLOAT16);
  x.add_shape(4096);
  x.set_inline_data(std::string(4096 * 2, '\0'));
  const std::string bytes = req.SerializeAsString();

  char err[256] = {0};
  kd_channel* ch = kd_channel_new(target.c_str(), 0, nullptr, 0, nullptr, 0, nullptr, 0, "",
                                  nullptr, nullptr, 0, err, sizeof err);
  if (ch == nullptr) {
    std::fprintf(stderr, "kd_channel_new: %s\n", err);
    return 1;
  }
  double spin_s = 0;
  auto native = [&] {
    kd_call* c = kd_call_start(ch, "/kerneld.v1.KernelService/Execute", bytes.data(), bytes.size(),
                               nullptr, 0);
    int code = spin_s > 0 ? kd_call_spin(c, spin_s) : -1;
    if (code < 0) code = kd_call_wait(c, 0.2);
    while (code < 0) code = kd_call_wait(c, 0.2);
    size_t n = 0;
    kd_call_data(c, &n);
    kd_call_free(c);
    return code == 0 && n > 0;
  };

  grpc::ChannelArguments args;
  args.SetMaxReceiveMessageSize(-1);
  args.SetMaxSendMessageSize(-1);
  auto channel = grpc::CreateCustomChannel(target, grpc::InsecureChannelCredentials(), args);
  const grpc::internal::RpcMethod method("/kerneld.v1.KernelService/Execute",
                                         grpc::internal::RpcMethod::NORMAL_RPC);
  auto blocking = [&] {
    grpc::ClientContext ctx;
    grpc::Slice s(bytes.data(), bytes.size(), grpc::Slice::STATIC_SLICE);
    grpc::ByteBuffer in(&s, 1), out;
    auto st = grpc::internal::BlockingUnaryCall<grpc::ByteBuffer, grpc::ByteBuffer>(
        channel.get(), method, &ctx, in, &out);
    return st.ok() && out.Length() > 0;
  };

  auto stub = kerneld::v1::KernelService::NewStub(
      grpc::CreateCustomChannel(target, grpc::InsecureChannelCredentials(), args));
  auto generated = [&] {
    grpc::ClientContext ctx;
    kerneld::v1::ExecuteResponse resp;
    return stub->Execute(&ctx, req, &resp).ok() && resp.status().code() == 0;
  };

  // A client does work between calls (building the next request, reading
  // the result): `think` busy-waits that long before each call, outside the
  // timed span, to show what an idle gap costs the next call.
  double think_us = 0;
  auto think = [&] {
    auto end = Clock::now() + std::chrono::duration<double, std::micro>(think_us);
    while (Clock::now() < end) {
    }
  };
  std::printf("unary Execute, scale 4096 float16 inline (cpu), %d calls a round\n", calls);
  std::printf("%-6s %-22s %9s %9s\n", "round", "variant", "p50 us", "p99 us");
  struct Variant {
    const char* name;
    double think_us, spin_us;
    std::function<bool()> f;
  };
  const std::vector<Variant> variants = {{"native", 0, 0, native},
                                         {"blocking", 0, 0, blocking},
                                         {"stub", 0, 0, generated},
                                         {"stub, think 60us", 60, 0, generated},
                                         {"native, think 60us", 60, 0, native},
                                         {"native, spin 300us", 0, 300, native},
                                         {"native, think 60 spin 300", 60, 300, native}};
  for (int r = 0; r < rounds; ++r) {
    for (const auto& v : variants) {
      think_us = v.think_us;
      spin_s = v.spin_us / 1e6;
      auto us = Time(calls, [&] {
        think();
        auto t0 = Clock::now();
        bool ok = v.f();
        return std::make_pair(ok, t0);
      });
      std::printf("%-6d %-26s %9.1f %9.1f\n", r, v.name, us[us.size() / 2],
                  us[us.size() * 99 / 100]);
    }
  }
  kd_channel_free(ch);
  return 0;
}
