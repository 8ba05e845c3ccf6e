#include "kserve/kserve_handlers.h"

#include "build_info.h"
#include "kserve/model_catalog.h"

namespace kerneld::server::kserve {

namespace {

void Duration(uint64_t count, double seconds, inference::StatisticDuration* d) {
  d->set_count(count);
  d->set_ns(static_cast<uint64_t>(seconds * 1e9));
}

void Statistics(const OpDef& op, const Metrics::OpTotals& t, inference::ModelStatistics* s) {
  s->set_name(op.name);
  s->set_version(kModelVersion);
  s->set_inference_count(t.ok);
  s->set_execution_count(t.executed);
  auto* i = s->mutable_inference_stats();
  Duration(t.ok, t.ok_s, i->mutable_success());
  Duration(t.failed, t.failed_s, i->mutable_fail());
  Duration(t.executed, t.queue_s, i->mutable_queue());
  Duration(t.executed, t.execute_s, i->mutable_compute_infer());
  // Staging inputs and outputs is part of the execute span kerneld measures.
  Duration(t.executed, 0, i->mutable_compute_input());
  Duration(t.executed, 0, i->mutable_compute_output());
}

bool HasGpu(const DeviceManager& devices) {
  for (const DeviceInfo& d : devices.Devices())
    if (d.device.is_cuda()) return true;
  return false;
}

}  // namespace

KServeHandlers::KServeHandlers(const Config& cfg, RequestRunner& runner, Metrics& metrics,
                               BufferHandlers& buffers, BufferRegistry& registry)
    : cfg_(cfg),
      runner_(runner),
      metrics_(metrics),
      buffers_(buffers),
      regions_(buffers, registry, runner.devices()) {}

Status KServeHandlers::DecodeInfer(const Principal& who, inference::ModelInferRequest* req,
                                   v1::ExecuteRequest* out, InferState* state) const {
  InferOptions opt;
  opt.test_ops = cfg_.enable_test_ops;
  return kserve::DecodeInfer(
      req, opt, [&](const std::string& name, RegionRef* r) { return regions_.Find(who, name, r); },
      out, state);
}

Status KServeHandlers::ParseInfer(const Principal& who, const grpc::ByteBuffer& in,
                                  InferExchange* x) const {
  KERNELD_RETURN_IF_ERROR(ParseRawMessage(in, &x->req));
  return DecodeInfer(who, &x->req, &x->exec, &x->state);
}

grpc::Status InferExchange::Answer(const Status& run, grpc::ByteBuffer* out) {
  Status st = run;
  if (st.ok()) st = EncodeInfer(&result, state, &resp);
  if (!st.ok()) return grpc::Status(static_cast<grpc::StatusCode>(st.code()), st.message());
  return SerializeRawMessage(resp, out);
}

Status KServeHandlers::ServerLive(const Identity&, const inference::ServerLiveRequest&,
                                  inference::ServerLiveResponse* resp) {
  resp->set_live(true);
  return Status::Ok();
}

Status KServeHandlers::ServerReady(const Identity&, const inference::ServerReadyRequest&,
                                   inference::ServerReadyResponse* resp) {
  resp->set_ready(!runner_.draining());
  return Status::Ok();
}

Status KServeHandlers::ModelReady(const Identity&, const inference::ModelReadyRequest& req,
                                  inference::ModelReadyResponse* resp) {
  const OpDef* op = nullptr;
  resp->set_ready(FindModel(req.name(), req.version(), cfg_.enable_test_ops, &op).ok() &&
                  !runner_.draining());
  return Status::Ok();
}

Status KServeHandlers::ServerMetadata(const Identity&, const inference::ServerMetadataRequest&,
                                      inference::ServerMetadataResponse* resp) {
  resp->set_name("kerneld");
  resp->set_version(kKerneldVersion);
  for (const char* e : {"model_configuration", "system_shared_memory", "parameters", "statistics"})
    resp->add_extensions(e);
  if (HasGpu(runner_.devices())) resp->add_extensions("cuda_shared_memory");
  return Status::Ok();
}

Status KServeHandlers::ModelMetadata(const Identity&, const inference::ModelMetadataRequest& req,
                                     inference::ModelMetadataResponse* resp) {
  const OpDef* op = nullptr;
  KERNELD_RETURN_IF_ERROR(FindModel(req.name(), req.version(), cfg_.enable_test_ops, &op));
  DescribeModel(*op, resp);
  return Status::Ok();
}

Status KServeHandlers::ModelConfig(const Identity&, const inference::ModelConfigRequest& req,
                                   inference::ModelConfigResponse* resp) {
  const OpDef* op = nullptr;
  KERNELD_RETURN_IF_ERROR(FindModel(req.name(), req.version(), cfg_.enable_test_ops, &op));
  ConfigureModel(*op, resp->mutable_config());
  return Status::Ok();
}

Status KServeHandlers::ModelStatistics(const Identity&,
                                       const inference::ModelStatisticsRequest& req,
                                       inference::ModelStatisticsResponse* resp) {
  std::vector<const OpDef*> ops;
  if (req.name().empty()) {
    ops = ServedModels(cfg_.enable_test_ops);
  } else {
    const OpDef* op = nullptr;
    KERNELD_RETURN_IF_ERROR(FindModel(req.name(), req.version(), cfg_.enable_test_ops, &op));
    ops.push_back(op);
  }
  for (const OpDef* op : ops) Statistics(*op, metrics_.Totals(op->name), resp->add_model_stats());
  return Status::Ok();
}

Status KServeHandlers::RepositoryIndex(const Identity&, const inference::RepositoryIndexRequest&,
                                       inference::RepositoryIndexResponse* resp) {
  for (const OpDef* op : ServedModels(cfg_.enable_test_ops)) {
    auto* m = resp->add_models();
    m->set_name(op->name);
    m->set_version(kModelVersion);
    m->set_state("READY");
  }
  return Status::Ok();
}

Status KServeHandlers::RepositoryModelLoad(const Identity&,
                                           const inference::RepositoryModelLoadRequest& req,
                                           inference::RepositoryModelLoadResponse*) {
  const OpDef* op = nullptr;  // every op is always loaded
  return FindModel(req.model_name(), "", cfg_.enable_test_ops, &op);
}

Status KServeHandlers::RepositoryModelUnload(const Identity&,
                                             const inference::RepositoryModelUnloadRequest& req,
                                             inference::RepositoryModelUnloadResponse*) {
  const OpDef* op = nullptr;
  KERNELD_RETURN_IF_ERROR(FindModel(req.model_name(), "", cfg_.enable_test_ops, &op));
  return {
      StatusCode::kFailedPrecondition,
      "model " + Quote(op->name) + " is one of kerneld's ops: they are built in and always loaded"};
}

Status KServeHandlers::SystemSharedMemoryStatus(
    const Identity& id, const inference::SystemSharedMemoryStatusRequest& req,
    inference::SystemSharedMemoryStatusResponse* resp) {
  return regions_.SystemStatus(id, req.name(), resp);
}

Status KServeHandlers::SystemSharedMemoryRegister(
    const Identity& id, const inference::SystemSharedMemoryRegisterRequest& req,
    inference::SystemSharedMemoryRegisterResponse*) {
  return regions_.RegisterSystem(id, req);
}

Status KServeHandlers::SystemSharedMemoryUnregister(
    const Identity& id, const inference::SystemSharedMemoryUnregisterRequest& req,
    inference::SystemSharedMemoryUnregisterResponse*) {
  return regions_.Unregister(id, req.name(), /*cuda=*/false);
}

Status KServeHandlers::CudaSharedMemoryStatus(const Identity& id,
                                              const inference::CudaSharedMemoryStatusRequest& req,
                                              inference::CudaSharedMemoryStatusResponse* resp) {
  return regions_.CudaStatus(id, req.name(), resp);
}

Status KServeHandlers::CudaSharedMemoryRegister(
    const Identity& id, const inference::CudaSharedMemoryRegisterRequest& req,
    inference::CudaSharedMemoryRegisterResponse*) {
  return regions_.RegisterCuda(id, req);
}

Status KServeHandlers::CudaSharedMemoryUnregister(
    const Identity& id, const inference::CudaSharedMemoryUnregisterRequest& req,
    inference::CudaSharedMemoryUnregisterResponse*) {
  return regions_.Unregister(id, req.name(), /*cuda=*/true);
}

Status KServeHandlers::TraceSetting(const Identity&, const inference::TraceSettingRequest&,
                                    inference::TraceSettingResponse*) {
  return {StatusCode::kUnimplemented,
          "kerneld's request traces are set by its flags (--trace_file, --trace_sample_rate; "
          "docs/metrics.md), not by TraceSetting"};
}

Status KServeHandlers::LogSettings(const Identity&, const inference::LogSettingsRequest&,
                                   inference::LogSettingsResponse*) {
  return {StatusCode::kUnimplemented,
          "kerneld's request log is set by its flags (--log_level, --log_format, --log_file; "
          "docs/metrics.md), not by LogSettings"};
}

}  // namespace kerneld::server::kserve
