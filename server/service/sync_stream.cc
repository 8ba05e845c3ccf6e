#include "service/sync_stream.h"

#include <grpc/grpc.h>

#include <utility>

#include "service/execute_stream.h"
#include "service/kernel_service.h"
#include "service/sync_service.h"

namespace kerneld::server {

namespace {

// Ready for the next message, keeping the info and status submessages and
// their strings' storage (Clear() deletes them; every answer sets both
// again). Their fields are cleared: nothing of the last answer is left.
void ResetResponse(v1::ExecuteResponse* resp) {
  resp->clear_request_id();
  resp->clear_outputs();
  if (resp->has_info()) resp->mutable_info()->Clear();
  if (resp->has_status()) resp->mutable_status()->Clear();
  resp->clear_graph();
}

}  // namespace

SyncExecuteStream::SyncExecuteStream(
    grpc::ServerContext* ctx, grpc::ServerReaderWriter<grpc::ByteBuffer, grpc::ByteBuffer>* stream,
    Limits limits)
    : ctx_(ctx), stream_(stream), limits_(limits) {}

SyncExecuteStream::~SyncExecuteStream() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_writer_ = true;
  }
  wake_writer_.notify_all();
  if (writer_.joinable()) writer_.join();
}

SyncExecuteStream::Message* SyncExecuteStream::TakeMessage() {
  std::lock_guard<std::mutex> lock(mu_);
  if (free_.empty()) {
    all_.push_back(std::make_unique<Message>());
    return all_.back().get();
  }
  Message* m = free_.back();
  free_.pop_back();
  return m;
}

void SyncExecuteStream::Completed(Message* m) {
  // Serialized here, on the completing thread, outside the lock.
  SerializeStreamResponse(m->resp, &m->out);
  std::lock_guard<std::mutex> lock(mu_);
  --inflight_;
  const int64_t bytes = static_cast<int64_t>(m->out.Length());
  m->held += bytes;
  held_bytes_ += bytes;
  ready_.push_back(m);
  // Not for an inline run: the handler writes it as its start returns.
  if (writer_.joinable() && !writing_ && std::this_thread::get_id() != handler_)
    wake_writer_.notify_one();
  // Under the lock: once inflight_ is 0 the handler may return and destroy
  // this stream, condition variables included.
  changed_.notify_all();
}

void SyncExecuteStream::WriteReady(std::unique_lock<std::mutex>& lock) {
  writing_ = true;
  while (!ready_.empty() && !write_failed_) {
    Message* m = ready_.front();
    ready_.pop_front();
    lock.unlock();
    const bool ok = stream_->Write(m->out);
    m->out.Clear();
    lock.lock();
    held_bytes_ -= m->held;
    m->held = 0;
    free_.push_back(m);
    if (!ok) {
      // The client went away: the handler may be blocked in Read; end it.
      write_failed_ = true;
      ctx_->TryCancel();
    }
  }
  writing_ = false;
  EndIfDrainedAndIdle();
  changed_.notify_all();
}

void SyncExecuteStream::WriterLoop() {
  std::unique_lock<std::mutex> lock(mu_);
  for (;;) {
    wake_writer_.wait(lock, [&] { return stop_writer_ || (!ready_.empty() && !writing_); });
    if (!ready_.empty() && !writing_ && !write_failed_) {
      WriteReady(lock);
      continue;
    }
    if (stop_writer_) return;
    if (write_failed_) ready_.clear();  // nobody to answer; the handler cleans up
  }
}

void SyncExecuteStream::EndIfDrainedAndIdle() {
  if (!drained_ || ended_ || !reading_ || inflight_ > 0 || !ready_.empty() || writing_) return;
  ended_ = true;
  // The status the callback stream's Finish would send. Read then returns
  // false and the handler returns; its own status is not sent again.
  grpc_call_cancel_with_status(ctx_->c_call(), GRPC_STATUS_UNAVAILABLE, drain_message_.c_str(),
                               nullptr);
}

void SyncExecuteStream::Drain() {
  std::lock_guard<std::mutex> lock(mu_);
  drained_ = true;
  EndIfDrainedAndIdle();
  changed_.notify_all();
}

grpc::Status SyncExecuteStream::Serve(const StartFn& start, const std::string& drain_message) {
  const grpc::Status drained_status(grpc::StatusCode::UNAVAILABLE, drain_message);
  grpc::Status result = grpc::Status::OK;
  handler_ = std::this_thread::get_id();
  {
    std::lock_guard<std::mutex> lock(mu_);
    drain_message_ = drain_message;
  }
  for (int64_t n = 1;; ++n) {
    {  // Back-pressure: stop reading while the stream holds its fill.
      std::unique_lock<std::mutex> lock(mu_);
      changed_.wait(lock, [&] {
        return write_failed_ || drained_ ||
               (inflight_ + static_cast<int>(ready_.size()) < limits_.window &&
                held_bytes_ < limits_.buffer_bytes);
      });
      if (write_failed_) break;
      if (drained_) {
        result = drained_status;
        break;
      }
      reading_ = true;
    }
    Message* m = TakeMessage();
    const bool got = stream_->Read(&m->in);
    {
      std::lock_guard<std::mutex> lock(mu_);
      reading_ = false;
      if (!got || ended_) {  // the client's half-close or end, or the drain's end
        free_.push_back(m);
        if (drained_) result = drained_status;
        break;
      }
    }
    const size_t bytes = m->in.Length();
    CallControl ctl = ControlFor(ctx_);  // admitted before the message is parsed
    m->req.Clear();
    // A refused message is not parsed; it answers in its response's status
    // (the runner sets it, as for a failed request) and the stream goes on.
    if (ctl.refused.ok() &&
        !grpc::SerializationTraits<v1::ExecuteRequest>::Deserialize(&m->in, &m->req).ok()) {
      std::lock_guard<std::mutex> lock(mu_);
      free_.push_back(m);
      result = MalformedStreamMessage(n, bytes);
      break;
    }
    m->in.Clear();
    ResetResponse(&m->resp);
    {
      std::lock_guard<std::mutex> lock(mu_);
      ++inflight_;
      m->held = static_cast<int64_t>(bytes);
      held_bytes_ += m->held;
    }
    // On the sync API IsCancelled() polls the call's queue: asked only of a
    // request that waited (sync_service.h).
    ctl.cancelled = CancelCheckAfter(kSyncCancelCheckAfter, std::move(ctl.cancelled));
    start(m->req, &m->resp, std::move(ctl), [this, m](const Status&) { Completed(m); });
    std::unique_lock<std::mutex> lock(mu_);
    // Answers already in (an inline run) go out from here, at once.
    if (!writing_ && !ready_.empty()) WriteReady(lock);
    // One still running must be written while this thread reads.
    if (inflight_ > 0 && !writer_.joinable()) writer_ = std::thread([this] { WriterLoop(); });
    if (drained_) {
      result = drained_status;
      break;
    }
  }
  // The answers due: every request started is answered and written (or the
  // client is gone) before the handler returns and gRPC ends the call.
  std::unique_lock<std::mutex> lock(mu_);
  changed_.wait(lock, [&] { return inflight_ == 0 && !writing_; });
  if (!ready_.empty() && !write_failed_ && !ended_) WriteReady(lock);
  return result;
}

}  // namespace kerneld::server
