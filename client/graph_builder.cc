#include "graph_builder.h"

#include <grpcpp/grpcpp.h>

#include "kerneld/v1/kerneld.grpc.pb.h"

namespace kerneld::client {

GraphBuilder::Ref GraphBuilder::Input(const std::string& name, const v1::Tensor& t) {
  (*req_.mutable_inputs())[name] = t;
  return {name};
}

GraphBuilder::Ref GraphBuilder::Input(const std::string& name, v1::DType dtype,
                                      const std::vector<int64_t>& shape,
                                      const std::string& buffer_id, uint64_t offset) {
  v1::Tensor& t = (*req_.mutable_inputs())[name];
  t.set_dtype(dtype);
  for (int64_t d : shape) t.add_shape(d);
  t.mutable_buffer()->set_buffer_id(buffer_id);
  t.mutable_buffer()->set_offset(offset);
  return {name};
}

GraphBuilder::Ref GraphBuilder::Step(const std::string& op,
                                     const std::map<std::string, Ref>& inputs,
                                     const std::map<std::string, Attr>& attrs,
                                     const std::string& name) {
  v1::GraphStep* s = req_.add_steps();
  s->set_op(op);
  if (!name.empty()) s->set_name(name);
  for (const auto& [in, ref] : inputs) (*s->mutable_inputs())[in] = ref.binding;
  for (const auto& [a, v] : attrs) {
    v1::AttrValue& av = (*s->mutable_attrs())[a];
    std::visit(
        [&](const auto& x) {
          using T = std::decay_t<decltype(x)>;
          if constexpr (std::is_same_v<T, double>) av.set_f(x);
          if constexpr (std::is_same_v<T, int64_t>) av.set_i(x);
          if constexpr (std::is_same_v<T, bool>) av.set_b(x);
          if constexpr (std::is_same_v<T, std::string>) av.set_s(x);
        },
        v);
  }
  return {name.empty() ? "step" + std::to_string(req_.steps_size() - 1) : name};
}

GraphBuilder::Ref GraphBuilder::Out(const Ref& step, const std::string& output) {
  const std::string& b = step.binding;
  return {b.substr(0, b.find('.')) + "." + output};
}

void GraphBuilder::Output(const std::string& name, const Ref& source) {
  v1::GraphOutput* o = req_.add_outputs();
  o->set_name(name);
  o->set_source(source.binding);
}

void GraphBuilder::Output(const std::string& name, const Ref& source, const std::string& buffer_id,
                          uint64_t offset) {
  v1::GraphOutput* o = req_.add_outputs();
  o->set_name(name);
  o->set_source(source.binding);
  o->mutable_buffer()->set_buffer_id(buffer_id);
  o->mutable_buffer()->set_offset(offset);
}

grpc::Status RunGraph(KernelClient& client, const v1::ExecuteGraphRequest& req,
                      v1::ExecuteGraphResponse* resp, std::chrono::milliseconds timeout) {
  if (!client.init_status().ok()) return client.init_status();
  auto stub = v1::KernelService::NewStub(client.channel());
  grpc::ClientContext ctx;
  if (timeout.count() > 0) ctx.set_deadline(std::chrono::system_clock::now() + timeout);
  return stub->ExecuteGraph(&ctx, req, resp);
}

}  // namespace kerneld::client
