// SIGHUP's token reload, off the signal thread: the signal thread only asks,
// and a thread of this class reads --auth_tokens. However long a reload
// takes, the signal thread is free to take SIGTERM and stop the daemon.
// Requests made while a reload runs fold into one more reload after it.
#pragma once

#include <condition_variable>
#include <functional>
#include <memory>
#include <mutex>
#include <thread>

namespace kerneld::server {

class TokenReloader {
 public:
  // `reload` re-reads the file and says how that went.
  explicit TokenReloader(std::function<void()> reload) : s_(std::make_shared<State>()) {
    // Detached, holding its state: a reload that never returns cannot hold
    // up the daemon's exit (the process ends around it).
    std::thread([s = s_, reload = std::move(reload)] {
      std::unique_lock<std::mutex> lock(s->mu);
      for (;;) {
        s->cv.wait(lock, [&] { return s->pending || s->stop; });
        if (s->stop) return;
        s->pending = false;
        lock.unlock();
        reload();
        lock.lock();
      }
    }).detach();
  }
  ~TokenReloader() {
    std::lock_guard<std::mutex> lock(s_->mu);
    s_->stop = true;
    s_->cv.notify_all();
  }
  void Request() {
    std::lock_guard<std::mutex> lock(s_->mu);
    s_->pending = true;
    s_->cv.notify_all();
  }

 private:
  struct State {
    std::mutex mu;
    std::condition_variable cv;
    bool pending = false, stop = false;
  };
  std::shared_ptr<State> s_;
};

}  // namespace kerneld::server
