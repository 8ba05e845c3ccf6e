// ExecuteStream on gRPC's sync API, pipelined (--grpc_api=sync, the
// default): the handler's thread reads a message, starts it, and reads the
// next without waiting for the answer, so requests run concurrently as on
// the callback stream (execute_stream.h): answers go out in completion
// order, each with its request_id, and the same --stream_window and
// --stream_buffer_mb bound what one stream holds before it stops reading.
//
// Who writes: a request that completes while its start returns (a short
// one the device worker ran inline, on this thread) is written by the
// handler's thread at once, as the one-at-a-time loop this replaced did:
// ping-pong on small requests pays no hand-off. Only when a request is
// still running as the handler goes back to reading (a GPU request, a long
// one, a pipelining client) does the stream start a writer thread of its
// own, which writes the answers that complete meanwhile; the worker that
// completes a request only queues it (a worker never waits on a client's
// flow control). Whichever thread writes takes the stream's one writing
// turn, so writes never overlap; reads stay on the handler's thread.
#pragma once

#include <grpcpp/grpcpp.h>
#include <grpcpp/support/sync_stream.h>

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "kerneld/v1/kerneld.pb.h"
#include "service/request_runner.h"

namespace kerneld::server {

class SyncExecuteStream {
 public:
  // Starts one admitted request; `done` is called once, maybe before it
  // returns (an inline run).
  using StartFn = std::function<void(const v1::ExecuteRequest&, v1::ExecuteResponse*, CallControl,
                                     std::function<void(const Status&)>)>;
  struct Limits {
    int window = 64;                           // requests in flight + answers not yet written
    int64_t buffer_bytes = int64_t{64} << 20;  // request + answer bytes held
  };

  SyncExecuteStream(grpc::ServerContext* ctx,
                    grpc::ServerReaderWriter<grpc::ByteBuffer, grpc::ByteBuffer>* stream,
                    Limits limits);
  ~SyncExecuteStream();
  SyncExecuteStream(const SyncExecuteStream&) = delete;
  SyncExecuteStream& operator=(const SyncExecuteStream&) = delete;

  // Serves the stream until the client half-closes (OK), a message does
  // not parse (INVALID_ARGUMENT, once the answers due are written), the
  // client goes away, or it is drained (UNAVAILABLE with `drain_message`,
  // once the answers due are written).
  grpc::Status Serve(const StartFn& start, const std::string& drain_message);
  // SIGTERM's drain, from any thread: reads no more messages and, once the
  // answers due are written, ends the stream with UNAVAILABLE. A sync
  // handler blocked in Read cannot return a status, so an idle stream's call
  // is ended from here with that status (grpc_call_cancel_with_status).
  void Drain();

 private:
  struct Message {
    grpc::ByteBuffer in, out;
    v1::ExecuteRequest req;
    v1::ExecuteResponse resp;
    int64_t held = 0;  // bytes counted against buffer_bytes
  };
  Message* TakeMessage();
  // From any thread, once a request's answer is in.
  void Completed(Message* m);
  // Writes ready answers while this thread holds the writing turn; lock held
  // on entry and exit.
  void WriteReady(std::unique_lock<std::mutex>& lock);
  void WriterLoop();
  // Under mu_: a drained stream with nothing due and its handler in Read is
  // ended now, with UNAVAILABLE.
  void EndIfDrainedAndIdle();

  grpc::ServerContext* const ctx_;
  grpc::ServerReaderWriter<grpc::ByteBuffer, grpc::ByteBuffer>* const stream_;
  const Limits limits_;
  std::mutex mu_;
  std::condition_variable changed_;  // for the handler: completions, writes
  std::condition_variable wake_writer_;
  int inflight_ = 0;
  int64_t held_bytes_ = 0;
  std::deque<Message*> ready_;  // answered, not yet written
  bool writing_ = false;        // a thread holds the writing turn
  bool write_failed_ = false;
  bool stop_writer_ = false;
  bool reading_ = false;  // the handler is in (or about to enter) Read
  bool drained_ = false;  // Drain() was called
  bool ended_ = false;    // the call was ended from here
  std::string drain_message_;
  std::thread writer_;
  std::thread::id handler_;  // Serve's thread
  std::vector<std::unique_ptr<Message>> all_;
  std::vector<Message*> free_;
};

}  // namespace kerneld::server
