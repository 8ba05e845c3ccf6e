#include "service/execute_stream.h"

#include <string>
#include <utility>

#include "auth/authenticator.h"
#include "graph/graph_stream.h"
#include "service/kernel_service.h"
#include "service/stream_codec.h"

namespace kerneld::server {

grpc::Status MalformedStreamMessage(int64_t n, size_t bytes) {
  return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT,
                      "ExecuteStream message " + std::to_string(n) +
                          " is not a valid kerneld.v1.ExecuteRequest (" + std::to_string(bytes) +
                          " bytes)");
}

void SerializeStreamResponse(const v1::ExecuteResponse& resp, grpc::ByteBuffer* out) {
  bool own = false;
  out->Clear();  // Serialize wants an empty buffer
  if (grpc::SerializationTraits<v1::ExecuteResponse>::Serialize(resp, out, &own).ok()) return;
  v1::ExecuteResponse small;
  small.set_request_id(resp.request_id());
  small.mutable_status()->set_code(static_cast<int>(StatusCode::kInternal));
  small.mutable_status()->set_message("response could not be serialized");
  out->Clear();
  (void)grpc::SerializationTraits<v1::ExecuteResponse>::Serialize(small, out, &own);
}

bool V1StreamCodec::Parse(grpc::ByteBuffer* in, v1::ExecuteRequest* req, std::unique_ptr<State>*,
                          Status*) {
  return grpc::SerializationTraits<v1::ExecuteRequest>::Deserialize(in, req).ok();
}

grpc::Status V1StreamCodec::Malformed(int64_t n, size_t bytes) const {
  return MalformedStreamMessage(n, bytes);
}

void V1StreamCodec::Serialize(const Status&, v1::ExecuteResponse* resp, State*,
                              grpc::ByteBuffer* out) {
  SerializeStreamResponse(*resp, out);
}

ExecuteStreamReactor::ExecuteStreamReactor(grpc::CallbackServerContext* ctx, RequestRunner& runner,
                                           Limits limits, std::unique_ptr<StreamCodec> codec)
    : ctx_(ctx),
      runner_(runner),
      limits_(limits),
      codec_(codec ? std::move(codec) : std::make_unique<V1StreamCodec>()) {
  {
    // The first read counts as starting before the stream is visible to
    // the drain (Open): the drain must not finish it before it is issued.
    std::lock_guard<std::mutex> lock(mu_);
    reading_ = true;
    starting_reads_ = 1;
  }
  // Counted before anything is read: beyond a limit, or while draining, the
  // stream ends at once and holds nothing.
  Status admitted;
  if (StreamRegistry* reg = CurrentStreamRegistry()) {
    Identity id;
    admitted = IdentifyCall(*ctx, &id);
    if (admitted.ok()) {
      // Counted by quota principal: every anonymous connection together.
      Principal who(QuotaPrincipal(id.principal));
      admitted = reg->Open(this, who);
      if (admitted.ok()) {
        // Under mu_: OnDone reads them on another thread, ordered by gRPC
        // (whose ordering ThreadSanitizer cannot see) and by this lock.
        std::lock_guard<std::mutex> lock(mu_);
        principal_ = std::move(who);
        registry_ = reg;
      }
    }
  }
  if (!admitted.ok()) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      reading_ = false;
      starting_reads_ = 0;
      finished_ = true;
    }
    Finish(ToGrpc(admitted));
    return;
  }
  IssueRead();
}

void ExecuteStreamReactor::IssueRead() {
  StartRead(&read_buf_);
  grpc::Status final_status;
  bool finish;
  {
    std::lock_guard<std::mutex> lock(mu_);
    --starting_reads_;
    finish = ShouldFinishLocked(&final_status);
  }
  if (finish) EndStream(final_status);
}

bool ExecuteStreamReactor::FullLocked() const {
  const int64_t pending = inflight_ + static_cast<int64_t>(write_queue_.size());
  return pending >= limits_.window || held_bytes_ >= limits_.buffer_bytes;
}

bool ExecuteStreamReactor::ResumeReadLocked() {
  if (reading_ || reads_done_ || broken_ || draining_ || finished_ || FullLocked()) return false;
  reading_ = true;
  ++starting_reads_;
  return true;
}

void ExecuteStreamReactor::OnReadDone(bool ok) {
  grpc::Status final_status;
  bool finish = false;
  if (!ok) {  // half-close or cancellation
    {
      std::lock_guard<std::mutex> lock(mu_);
      reading_ = false;
      reads_done_ = true;
      finish = ShouldFinishLocked(&final_status);
    }
    if (finish) EndStream(final_status);
    return;
  }
  auto item = std::make_unique<Item>();
  const int64_t n = ++messages_read_;
  item->req_bytes = static_cast<int64_t>(read_buf_.Length());
  const bool parsed = codec_->Parse(&read_buf_, &item->req, &item->state, &item->refused);
  read_buf_.Clear();
  if (!parsed) {
    // Answer what was already accepted, then end the stream with the reason:
    // the typed API would have ended it OK and dropped the rest silently.
    {
      std::lock_guard<std::mutex> lock(mu_);
      reading_ = false;
      reads_done_ = true;
      if (!finished_) error_ = codec_->Malformed(n, static_cast<size_t>(item->req_bytes));
      finish = ShouldFinishLocked(&final_status);
    }
    if (finish) EndStream(final_status);
    return;
  }
  Item* raw = item.release();  // owned by its completion (Completed)
  bool read_more = false, dropped = false;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (broken_) {
      // Read in full just as the client cancelled: nobody will receive the
      // answer, so run nothing (and hand no request the context of a call
      // that is about to end).
      dropped = true;
      reading_ = false;
      reads_done_ = true;
      finish = ShouldFinishLocked(&final_status);
    } else if (finished_) {
      // The drain finished the stream while this message was on its way:
      // it is not run (the client reads UNAVAILABLE and may retry it).
      dropped = true;
      reading_ = false;
    } else {
      ++inflight_;
      ++refs_;
      held_bytes_ += raw->req_bytes;
      // Decided before Start: a request rejected inline completes (and may
      // resume reading) inside Start. A draining stream reads no more.
      read_more = !FullLocked() && !draining_;
      reading_ = read_more;
      starting_reads_ += read_more;
    }
  }
  if (dropped) {
    delete raw;
    if (finish) EndStream(final_status);
    return;
  }
  if (!raw->refused.ok()) {  // the codec's refusal: answered, not run
    Completed(raw);
    if (read_more) IssueRead();
    return;
  }
  auto completed = [this, raw](const Status&) { Completed(raw); };
  if (raw->req.has_graph())  // graph/graph_stream.h
    StartGraphMessage(raw->req, &raw->resp, ControlFor(ctx_), std::move(completed));
  else
    runner_.Start(raw->req, &raw->resp, ControlFor(ctx_), std::move(completed));
  if (read_more) IssueRead();
}

void ExecuteStreamReactor::Completed(Item* raw) {
  std::unique_ptr<Item> item(raw);
  // Serialize here and free the request and response at once: a queued
  // response then holds only its wire bytes.
  codec_->Serialize(item->refused, &item->resp, item->state.get(), &item->out);
  item->out_bytes = static_cast<int64_t>(item->out.Length());
  item->state.reset();
  v1::ExecuteRequest().Swap(&item->req);  // Clear() would keep the strings' capacity
  v1::ExecuteResponse().Swap(&item->resp);

  const grpc::ByteBuffer* to_write = nullptr;
  bool resume_read = false, finish = false;
  grpc::Status final_status;
  {
    std::lock_guard<std::mutex> lock(mu_);
    --inflight_;
    held_bytes_ -= item->req_bytes;
    if (!broken_ && !finished_) {
      held_bytes_ += item->out_bytes;
      write_queue_.push_back(std::move(item));
      if (!writing_) {
        writing_ = true;
        to_write = &write_queue_.front()->out;
      }
    }
    resume_read = ResumeReadLocked();
    finish = ShouldFinishLocked(&final_status);
  }
  if (to_write) StartWrite(to_write);
  if (finish) EndStream(final_status);
  if (resume_read) IssueRead();
  Release();
}

void ExecuteStreamReactor::OnWriteDone(bool ok) {
  const grpc::ByteBuffer* to_write = nullptr;
  bool resume_read = false, finish;
  grpc::Status final_status;
  {
    std::lock_guard<std::mutex> lock(mu_);
    held_bytes_ -= write_queue_.front()->out_bytes;
    write_queue_.pop_front();
    if (!ok) {  // the client is gone: drop what is queued
      broken_ = true;
      for (const auto& it : write_queue_) held_bytes_ -= it->out_bytes;
      write_queue_.clear();
    }
    if (!write_queue_.empty()) {
      to_write = &write_queue_.front()->out;
    } else {
      writing_ = false;
    }
    resume_read = ResumeReadLocked();
    finish = ShouldFinishLocked(&final_status);
  }
  if (to_write) StartWrite(to_write);
  if (finish) EndStream(final_status);
  if (resume_read) IssueRead();
}

bool ExecuteStreamReactor::ShouldFinishLocked(grpc::Status* st) {
  if (finished_) return false;
  if (inflight_ > 0 || writing_ || !write_queue_.empty()) return false;
  // A read decided and about to be started by another thread (reading_ and
  // starting_reads_ are set under mu_, StartRead is called after it is
  // released) must be issued first: a StartRead after Finish touched a
  // finished call and killed the daemon when a client cancelled a stream
  // whose request was running.
  if (starting_reads_ > 0) return false;
  if (reads_done_ || broken_) {
    // An outstanding read ends first: a cancelled call fails it at once
    // (OnReadDone(false)), which finishes the stream.
    if (reading_) return false;
  } else if (!draining_) {
    return false;
  }
  // Draining with a read outstanding (an idle client): gRPC fails that read
  // once the stream is finished, and the drain need not wait for the client.
  finished_ = true;
  if (broken_)
    *st = grpc::Status(grpc::StatusCode::CANCELLED, "stream broken");
  else if (error_)
    *st = *error_;
  else if (reads_done_)
    *st = grpc::Status::OK;
  else
    *st = grpc::Status(grpc::StatusCode::UNAVAILABLE,
                       "kerneld is shutting down: this stream reads no more requests (those "
                       "already read were answered); retry the rest on another replica");
  return true;
}

void ExecuteStreamReactor::OnCancel() {
  // In-flight requests see ctx_->IsCancelled() and complete without running;
  // a pending write fails. Nothing outstanding: finish here.
  grpc::Status final_status;
  bool finish;
  {
    std::lock_guard<std::mutex> lock(mu_);
    broken_ = true;
    finish = ShouldFinishLocked(&final_status);
  }
  if (finish) EndStream(final_status);
}

void ExecuteStreamReactor::Drain() {
  grpc::Status final_status;
  bool finish;
  {
    std::lock_guard<std::mutex> lock(mu_);
    draining_ = true;
    finish = ShouldFinishLocked(&final_status);
  }
  if (finish) EndStream(final_status);
}

void ExecuteStreamReactor::Ref() {
  std::lock_guard<std::mutex> lock(mu_);
  ++refs_;
}

void ExecuteStreamReactor::EndStream(const grpc::Status& st) {
  // A reference of its own across Finish, after which OnDone may run: the
  // stream leaves the registry once its status is issued, not before (the
  // drain, which waits for the registry to empty, then shuts gRPC down).
  {
    std::lock_guard<std::mutex> lock(mu_);
    ++refs_;
  }
  Finish(st);
  LeaveRegistry();
  Release();
}

void ExecuteStreamReactor::LeaveRegistry() {
  StreamRegistry* registry;
  {
    std::lock_guard<std::mutex> lock(mu_);
    registry = std::exchange(registry_, nullptr);
  }
  if (registry) registry->Close(this, principal_);  // principal_ is no longer written
}

void ExecuteStreamReactor::OnDone() {
  LeaveRegistry();  // normally a no-op: EndStream left it already
  Release();
}

void ExecuteStreamReactor::Release() {
  bool last;
  {
    std::lock_guard<std::mutex> lock(mu_);
    last = --refs_ == 0;
  }
  if (last) delete this;
}

}  // namespace kerneld::server
