// Building and running an ExecuteGraph request (docs/graphs.md):
//
//   client::GraphBuilder g;
//   auto x = g.Input("x", x_tensor);                  // inline, or g.Input("w", dtype, shape, ref)
//   auto h = g.Step("rmsnorm", {{"x", x}, {"weight", w}}, {{"eps", 1e-5}});
//   auto y = g.Step("silu_and_mul", {{"x", h}});
//   g.Output("y", y);                                  // none declared: the last step's outputs
//   v1::ExecuteGraphResponse resp;
//   grpc::Status st = client::RunGraph(client, g.request(), &resp);
//
// A Ref is what a step input binds to: a graph input's name, or
// "<step>.<output>"; Step returns its first output, and Out(step, name)
// names another one.
#pragma once

#include <chrono>
#include <map>
#include <string>
#include <utility>
#include <variant>

#include "client.h"
#include "kerneld/v1/kerneld.pb.h"

namespace kerneld::client {

class GraphBuilder {
 public:
  struct Ref {
    std::string binding;  // "x", "step0.y"
  };
  using Attr = std::variant<double, int64_t, bool, std::string>;

  // A graph input sent inline (dtype, shape and bytes of `t`).
  Ref Input(const std::string& name, const v1::Tensor& t);
  // A graph input in a registered buffer.
  Ref Input(const std::string& name, v1::DType dtype, const std::vector<int64_t>& shape,
            const std::string& buffer_id, uint64_t offset = 0);
  // Appends a step; returns its first output. `name` "" names it "step<index>".
  Ref Step(const std::string& op, const std::map<std::string, Ref>& inputs,
           const std::map<std::string, Attr>& attrs = {}, const std::string& name = "");
  // Output `output` of the step that produced `step` (any Ref Step returned).
  static Ref Out(const Ref& step, const std::string& output);
  // Declares a graph output: returned inline, or written into a buffer.
  void Output(const std::string& name, const Ref& source);
  void Output(const std::string& name, const Ref& source, const std::string& buffer_id,
              uint64_t offset = 0);
  void SetDevice(const std::string& device) { req_.set_device(device); }

  const v1::ExecuteGraphRequest& request() const { return req_; }
  v1::ExecuteGraphRequest& mutable_request() { return req_; }

 private:
  v1::ExecuteGraphRequest req_;
};

// Runs a graph on `client`'s channel. timeout 0: the client's default.
grpc::Status RunGraph(KernelClient& client, const v1::ExecuteGraphRequest& req,
                      v1::ExecuteGraphResponse* resp,
                      std::chrono::milliseconds timeout = std::chrono::milliseconds{0});

}  // namespace kerneld::client
