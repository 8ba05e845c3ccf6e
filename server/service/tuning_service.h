// kerneld.v1.TuningService (docs/architecture.md, "Scheduling: the
// rules"): Tune, the offline sweep `kernelctl tune` runs. For each dtype and
// problem of the request and each device model (scheduler/tune_timing.h:
// kernel_bench's method), it times every implementation the scheduler
// would choose among, merges the medians into the tuning table, and writes
// the table to --tuning_file. Admin principals only: it occupies the
// device. One Tune at a time; it runs on the thread that serves it and
// stops between problems when its caller cancels. Served raw like the
// other services (raw_unary.h), on the callback API or the sync one.
#pragma once

#include <grpcpp/grpcpp.h>

#include <functional>
#include <mutex>

#include "auth/identity.h"
#include "config.h"
#include "devices/device_manager.h"
#include "kerneld/v1/kerneld.grpc.pb.h"
#include "scheduler/tuning_table.h"
#include "service/raw_unary.h"

namespace kerneld::server {

class TuneHandler {
 public:
  TuneHandler(const Config& cfg, const DeviceManager& devices, TuningTable& table)
      : cfg_(cfg), devices_(devices), table_(table) {}

  // The RPC after admission: `cancelled` is polled between problems.
  Status Tune(const Identity& who, const v1::TuneRequest& req,
              const std::function<bool()>& cancelled, v1::TuneResponse* resp);
  grpc::Status Answer(grpc::ServerContextBase& ctx, const grpc::ByteBuffer& in,
                      grpc::ByteBuffer* out);

 private:
  const Config& cfg_;
  const DeviceManager& devices_;
  TuningTable& table_;
  std::mutex running_;  // one Tune at a time
};

using TuningServiceBase = v1::TuningService::WithRawCallbackMethod_Tune<v1::TuningService::Service>;

class TuningServiceImpl final : public TuningServiceBase {
 public:
  explicit TuningServiceImpl(TuneHandler& h) : h_(h) {}
  grpc::ServerUnaryReactor* Tune(grpc::CallbackServerContext* ctx, const grpc::ByteBuffer* req,
                                 grpc::ByteBuffer* resp) override;

 private:
  TuneHandler& h_;
};

class TuningServiceSyncImpl final : public RawSyncService {
 public:
  explicit TuningServiceSyncImpl(TuneHandler& h);

 private:
  TuneHandler& h_;
};

}  // namespace kerneld::server
