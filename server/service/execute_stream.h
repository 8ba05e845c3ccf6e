// ExecuteStream: a bidirectional stream of requests and responses.
//
// Requests run concurrently and responses are written in completion order,
// one write at a time, each carrying its request_id; a failed request
// reports in its response's status and the stream goes on.
//
// Back-pressure: the stream stops reading while the requests in flight plus
// the responses waiting to be written reach --stream_window, or while the
// bytes it holds (requests read and responses not yet written) reach
// --stream_buffer_mb; it reads again as work completes and writes drain.
// A client that sends without reading therefore stalls on HTTP/2 flow
// control instead of growing the daemon's memory.
//
// The messages are kerneld.v1's by default; a StreamCodec gives the same
// machinery another protocol's (KServe v2's ModelStreamInfer:
// kserve/kserve_stream.h).
//
// The method is served raw (grpc::ByteBuffer in and out) so that a message
// that does not parse is told apart from the client's half-close (the typed
// API reports both as a failed read): it ends the stream with
// INVALID_ARGUMENT once the responses already due are written.
//
// Limits and drain (stream_registry.h): a stream beyond --max_streams or its
// principal's --quota_streams ends at once with RESOURCE_EXHAUSTED. On
// SIGTERM every open stream stops reading and, once the responses already
// due are written, ends with UNAVAILABLE (OK if the client had half-closed),
// never CANCELLED by the server's shutdown.
#pragma once

#include <grpcpp/grpcpp.h>

#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <optional>

#include "kerneld/v1/kerneld.grpc.pb.h"
#include "service/request_runner.h"
#include "service/stream_codec.h"
#include "service/stream_registry.h"

namespace kerneld::server {

// The wire side of an ExecuteStream message, shared by the callback stream
// (ExecuteStreamReactor) and the sync one (sync_service.h).
//
// The status that ends a stream whose n-th message (of `bytes`) does not
// parse as an ExecuteRequest.
grpc::Status MalformedStreamMessage(int64_t n, size_t bytes);
// resp into *out (emptied first). A response that cannot be serialized is
// answered by a small INTERNAL one with the same request_id.
void SerializeStreamResponse(const v1::ExecuteResponse& resp, grpc::ByteBuffer* out);

class ExecuteStreamReactor : public grpc::ServerBidiReactor<grpc::ByteBuffer, grpc::ByteBuffer>,
                             public DrainableStream {
 public:
  struct Limits {
    int window = 64;                    // requests in flight + responses queued
    int64_t buffer_bytes = 64LL << 20;  // request + response bytes held
  };
  // `codec` null: kerneld.v1's messages (V1StreamCodec).
  ExecuteStreamReactor(grpc::CallbackServerContext* ctx, RequestRunner& runner, Limits limits,
                       std::unique_ptr<StreamCodec> codec = nullptr);

  void OnReadDone(bool ok) override;
  void OnWriteDone(bool ok) override;
  void OnCancel() override;
  void OnDone() override;

  // DrainableStream.
  void Drain() override;
  void Ref() override;
  void Unref() override { Release(); }

 private:
  struct Item {
    v1::ExecuteRequest req;
    v1::ExecuteResponse resp;
    grpc::ByteBuffer out;                       // the serialized response, once completed
    std::unique_ptr<StreamCodec::State> state;  // the codec's, until serialized
    Status refused;  // not OK: answered with this, not run (StreamCodec::Parse)
    int64_t req_bytes = 0, out_bytes = 0;
  };
  void Completed(Item* raw);
  // With mu_ held: whether reading must pause (window or bytes reached).
  bool FullLocked() const;
  // With mu_ held: whether a paused read may start again; marks it started.
  bool ResumeReadLocked();
  // With mu_ held: finishes once reading ended (or the client is gone) and
  // nothing is running or waiting to be written; sets *st.
  bool ShouldFinishLocked(grpc::Status* st);
  void Release();  // drops one reference; the last deletes this
  // Every Finish of an admitted stream: finishes, then leaves the registry.
  // The stream stops counting as open when its status is issued, not when
  // gRPC gets round to OnDone: under load that came only when the server
  // shut down, and the drain waited its whole timeout for a stream whose
  // client had its status already.
  void EndStream(const grpc::Status& st);
  void LeaveRegistry();  // once: later calls find registry_ null
  // Issues the read decided under mu_ (reading_ set, starting_reads_
  // counted), then finishes the stream if that waited for the read to start.
  void IssueRead();

  grpc::CallbackServerContext* ctx_;
  RequestRunner& runner_;
  const Limits limits_;
  const std::unique_ptr<StreamCodec> codec_;

  grpc::ByteBuffer read_buf_;  // one read at a time
  int64_t messages_read_ = 0;

  std::mutex mu_;
  std::deque<std::unique_ptr<Item>> write_queue_;  // front is being written while writing_
  int inflight_ = 0;
  int64_t held_bytes_ = 0;
  bool reading_ = false;     // a read is outstanding
  bool reads_done_ = false;  // half-close, or a message that did not parse
  bool writing_ = false;
  bool broken_ = false;  // a write failed or the call was cancelled
  bool finished_ = false;
  // Reads decided under mu_ whose StartRead is not issued yet. Only the
  // drain finishes a stream with a read outstanding (gRPC then fails the
  // read); never before the read is issued (a StartRead after Finish
  // touches a finished call).
  int starting_reads_ = 0;
  bool draining_ = false;               // SIGTERM: read no more, end UNAVAILABLE
  StreamRegistry* registry_ = nullptr;  // counted there while open
  Principal principal_;
  std::optional<grpc::Status> error_;  // the stream's status once what is due is written
  // References: gRPC's (until OnDone) + one per in-flight request, so a
  // worker completing after a cancelled stream never touches freed memory.
  int refs_ = 1;
};

}  // namespace kerneld::server
