#include "service/execute_stream.h"

#include <algorithm>

#include "service/kernel_service.h"

namespace kerneld::server {

ExecuteStreamReactor::ExecuteStreamReactor(grpc::CallbackServerContext* ctx, RequestRunner& runner,
                                           int window)
    : ctx_(ctx), runner_(runner), window_(window) {
  StartNextRead();
}

void ExecuteStreamReactor::StartNextRead() {
  reading_ = std::make_unique<Item>();
  StartRead(&reading_->req);
}

void ExecuteStreamReactor::OnReadDone(bool ok) {
  if (!ok) {
    bool finish;
    {
      std::lock_guard<std::mutex> lock(mu_);
      reads_done_ = true;
      reading_.reset();
      finish = ShouldFinishLocked();
    }
    if (finish) Finish(grpc::Status::OK);
    return;
  }
  Item* item = reading_.get();
  bool read_more;
  {
    std::lock_guard<std::mutex> lock(mu_);
    running_owner_.push_back(std::move(reading_));
    ++inflight_;
    ++refs_;
    read_more = inflight_ < window_;
    read_paused_ = !read_more;
  }
  CallControl ctl = ControlFor(ctx_);
  runner_.Start(item->req, &item->resp, ctl, [this, item](const Status&) { Completed(item); });
  if (read_more) StartNextRead();
}

void ExecuteStreamReactor::Completed(Item* item) {
  const v1::ExecuteResponse* to_write = nullptr;
  bool resume_read = false, finish = false;
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = std::find_if(running_owner_.begin(), running_owner_.end(),
                           [item](const auto& p) { return p.get() == item; });
    std::unique_ptr<Item> owned = std::move(*it);
    running_owner_.erase(it);
    --inflight_;
    if (!write_failed_ && !finished_) {
      write_queue_.push_back(std::move(owned));
      if (!writing_) {
        writing_ = true;
        to_write = &write_queue_.front()->resp;
      }
    }
    if (read_paused_ && !reads_done_ && !write_failed_ && inflight_ < window_) {
      read_paused_ = false;
      resume_read = true;
    }
    finish = ShouldFinishLocked();
  }
  if (to_write) StartWrite(to_write);
  if (resume_read) StartNextRead();
  if (finish) Finish(write_failed_ ? grpc::Status(grpc::StatusCode::CANCELLED, "stream broken") : grpc::Status::OK);
  Release();
}

void ExecuteStreamReactor::OnWriteDone(bool ok) {
  const v1::ExecuteResponse* to_write = nullptr;
  bool finish;
  {
    std::lock_guard<std::mutex> lock(mu_);
    write_queue_.pop_front();
    if (!ok) {
      write_failed_ = true;  // the client is gone: drop what is queued
      write_queue_.clear();
    }
    if (!write_queue_.empty()) {
      to_write = &write_queue_.front()->resp;
    } else {
      writing_ = false;
    }
    finish = ShouldFinishLocked();
  }
  if (to_write) StartWrite(to_write);
  if (finish) Finish(write_failed_ ? grpc::Status(grpc::StatusCode::CANCELLED, "stream broken") : grpc::Status::OK);
}

bool ExecuteStreamReactor::ShouldFinishLocked() {
  if (finished_) return false;
  if ((reads_done_ || write_failed_) && inflight_ == 0 && !writing_ && write_queue_.empty() &&
      (reads_done_ || !read_paused_)) {
    // With a failed write, reading may still be pending; gRPC ends it when
    // the call finishes.
    finished_ = true;
    return true;
  }
  return false;
}

void ExecuteStreamReactor::OnCancel() {
  // In-flight requests see ctx_->IsCancelled() and complete without running;
  // their completions drive Finish.
}

void ExecuteStreamReactor::OnDone() { Release(); }

void ExecuteStreamReactor::Release() {
  bool last;
  {
    std::lock_guard<std::mutex> lock(mu_);
    last = --refs_ == 0;
  }
  if (last) delete this;
}

}  // namespace kerneld::server
