// ExecuteStream: a bidirectional stream of requests and responses.
//
// Requests run concurrently (up to --stream_window in flight; reading pauses
// beyond that, which is the stream's back-pressure). Responses are written
// in completion order, one write at a time, and carry their request_id; a
// failed request reports in its response's status and the stream goes on.
#pragma once

#include <deque>
#include <memory>
#include <mutex>

#include <grpcpp/grpcpp.h>

#include "kerneld/v1/kerneld.grpc.pb.h"
#include "service/request_runner.h"

namespace kerneld::server {

class ExecuteStreamReactor : public grpc::ServerBidiReactor<v1::ExecuteRequest, v1::ExecuteResponse> {
 public:
  ExecuteStreamReactor(grpc::CallbackServerContext* ctx, RequestRunner& runner, int window);

  void OnReadDone(bool ok) override;
  void OnWriteDone(bool ok) override;
  void OnCancel() override;
  void OnDone() override;

 private:
  struct Item {
    v1::ExecuteRequest req;
    v1::ExecuteResponse resp;
  };
  void Completed(Item* item);
  void StartNextRead();
  // Called with mu_ held: finishes once reading ended and nothing is pending.
  bool ShouldFinishLocked();
  void Release();  // drops one reference; the last deletes this

  grpc::CallbackServerContext* ctx_;
  RequestRunner& runner_;
  const int window_;

  std::mutex mu_;
  std::unique_ptr<Item> reading_;
  std::deque<std::unique_ptr<Item>> write_queue_;
  std::deque<std::unique_ptr<Item>> running_owner_;  // keeps in-flight items alive
  int inflight_ = 0;
  bool read_paused_ = false;
  bool reads_done_ = false;
  bool writing_ = false;
  bool write_failed_ = false;
  bool finished_ = false;
  // References: gRPC's (until OnDone) + one per in-flight request, so a
  // worker completing after a cancelled stream never touches freed memory.
  int refs_ = 1;
};

}  // namespace kerneld::server
