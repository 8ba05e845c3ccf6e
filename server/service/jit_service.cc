#include "service/jit_service.h"

#include <map>

#include "service/kernel_service.h"

namespace kerneld::server {

grpc::Status AnswerWarmJit(const grpc::ServerContextBase& ctx, jit::JitBackend& jit,
                           const grpc::ByteBuffer& in, grpc::ByteBuffer* out) {
  if (Status st = Authenticate(ctx); !st.ok()) return ToGrpc(st);
  v1::WarmJitRequest req;
  if (Status st = ParseRawMessage(in, &req); !st.ok()) return ToGrpc(st);
  const auto dtype = ParseDType(req.dtype());
  if (!dtype) return ToGrpc(InvalidArgument("WarmJit: unknown dtype " + Quote(req.dtype())));
  if (req.shape_size() == 0 || req.shape_size() > 8)
    return ToGrpc(InvalidArgument("WarmJit: shape needs 1 to 8 dims (the op's first input's)"));
  Shape shape;
  for (int64_t d : req.shape()) {
    if (d < 0 || d > (int64_t{1} << 40))
      return ToGrpc(InvalidArgument("WarmJit: shape dim " + std::to_string(d) + " out of range"));
    shape.push_back(d);
  }
  std::vector<jit::JitBackend::WarmResult> results;
  if (Status st = jit.Warm(req.op(), *dtype, shape, req.arch(), req.sm_count(), &results); !st.ok())
    return ToGrpc(st);
  v1::WarmJitResponse resp;
  for (const auto& r : results) {
    v1::JitKernel* k = resp.add_kernels();
    k->set_op(r.op);
    k->set_kernel(r.kernel);
    k->set_arch(r.arch);
    k->set_key(r.key);
    k->set_cache_hit(r.cache_hit);
    k->set_compile_seconds(r.seconds);
    k->set_devices_loaded(r.devices_loaded);
  }
  return SerializeRawMessage(resp, out);
}

grpc::Status AnswerListJitCache(const grpc::ServerContextBase& ctx, const jit::JitBackend& jit,
                                const grpc::ByteBuffer& in, grpc::ByteBuffer* out) {
  if (Status st = Authenticate(ctx); !st.ok()) return ToGrpc(st);
  v1::ListJitCacheRequest req;
  if (Status st = ParseRawMessage(in, &req); !st.ok()) return ToGrpc(st);
  v1::ListJitCacheResponse resp;
  resp.set_mode(jit.mode());
  resp.set_nvrtc_version(jit.NvrtcVersion());
  resp.set_status(jit.Unavailable().value_or(""));
  std::map<std::string, std::string> kernel_of_key;
  for (const auto& s : jit.Specializations()) {
    v1::JitKernel* k = resp.add_kernels();
    k->set_op(s.op);
    k->set_kernel(s.kernel);
    k->set_state(s.state);
    k->set_error(s.error);
    k->set_devices_loaded(s.devices_loaded);
    for (const auto& key : s.keys) {
      k->add_keys(key);
      kernel_of_key[key] = s.kernel;
    }
  }
  if (const jit::DiskCache* cache = jit.cache()) {
    resp.set_cache_dir(cache->dir());
    resp.set_cache_status(cache->reason());
    for (const auto& e : cache->List()) {
      v1::JitCacheEntry* o = resp.add_entries();
      o->set_key(e.key);
      o->set_bytes(e.bytes);
      o->set_used_unix_ns(e.used_ns);
      if (auto it = kernel_of_key.find(e.key); it != kernel_of_key.end()) o->set_kernel(it->second);
    }
  }
  for (const auto& op : JitOps()) resp.add_ops(op);
  return SerializeRawMessage(resp, out);
}

grpc::ServerUnaryReactor* JitServiceImpl::WarmJit(grpc::CallbackServerContext* ctx,
                                                  const grpc::ByteBuffer* req,
                                                  grpc::ByteBuffer* resp) {
  grpc::ServerUnaryReactor* reactor = ctx->DefaultReactor();
  reactor->Finish(AnswerWarmJit(*ctx, jit_, *req, resp));
  return reactor;
}

grpc::ServerUnaryReactor* JitServiceImpl::ListJitCache(grpc::CallbackServerContext* ctx,
                                                       const grpc::ByteBuffer* req,
                                                       grpc::ByteBuffer* resp) {
  grpc::ServerUnaryReactor* reactor = ctx->DefaultReactor();
  reactor->Finish(AnswerListJitCache(*ctx, jit_, *req, resp));
  return reactor;
}

JitServiceSyncImpl::JitServiceSyncImpl(jit::JitBackend& jit) : jit_(jit) {
  const std::string svc = "kerneld.v1.JitService";
  AddUnary(svc, "WarmJit",
           [this](grpc::ServerContext* ctx, const grpc::ByteBuffer& in, grpc::ByteBuffer* out) {
             return AnswerWarmJit(*ctx, jit_, in, out);
           });
  AddUnary(svc, "ListJitCache",
           [this](grpc::ServerContext* ctx, const grpc::ByteBuffer& in, grpc::ByteBuffer* out) {
             return AnswerListJitCache(*ctx, jit_, in, out);
           });
}

}  // namespace kerneld::server
