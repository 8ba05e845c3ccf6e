#include "native_call.h"

#include <grpcpp/generic/generic_stub.h>
#include <grpcpp/grpcpp.h>

#include <charconv>
#include <chrono>
#include <cstring>
#include <memory>
#include <string>

struct kd_channel {
  std::shared_ptr<grpc::Channel> channel;
  std::unique_ptr<grpc::GenericStub> stub;
};

namespace {

// Each thread waits for its calls on its own completion queue, as gRPC's
// blocking stubs do, so a call never hops threads. The queue lives as long
// as the thread; at thread exit it is shut down and drained.
struct ThreadQueue {
  grpc::CompletionQueue cq;
  ~ThreadQueue() {
    cq.Shutdown();
    void* tag;
    bool ok;
    while (cq.Next(&tag, &ok)) {
    }
  }
};

grpc::CompletionQueue* ThisThreadsQueue() {
  thread_local ThreadQueue q;
  return &q.cq;
}

std::chrono::system_clock::time_point After(double seconds) {
  return std::chrono::system_clock::now() +
         std::chrono::duration_cast<std::chrono::system_clock::duration>(
             std::chrono::duration<double>(seconds));
}

void Copy(const std::string& s, char* out, size_t len) {
  if (out == nullptr || len == 0) return;
  size_t n = s.size() < len - 1 ? s.size() : len - 1;
  std::memcpy(out, s.data(), n);
  out[n] = '\0';
}

}  // namespace

struct kd_call {
  grpc::ClientContext ctx;
  grpc::ByteBuffer response;
  grpc::Slice response_slice;
  grpc::Status status;
  std::string message;  // status.error_message() returns a copy: kept here
  std::unique_ptr<grpc::GenericClientAsyncResponseReader> reader;
  grpc::CompletionQueue* cq = nullptr;  // null: never started (status says why)
  bool done = false;
};

namespace {

// One event from the thread's queue (waiting until `deadline`): marks the
// call it belongs to, which may be another call of this thread. False when
// the deadline passed first.
bool NextEvent(kd_call* call, std::chrono::system_clock::time_point deadline) {
  void* tag = nullptr;
  bool ok = false;
  switch (call->cq->AsyncNext(&tag, &ok, deadline)) {
    case grpc::CompletionQueue::GOT_EVENT:
      static_cast<kd_call*>(tag)->done = true;
      return true;
    case grpc::CompletionQueue::SHUTDOWN:  // only at thread exit; not reached
      call->status = grpc::Status(grpc::StatusCode::CANCELLED, "the thread's queue shut down");
      call->done = true;
      return true;
    default:
      return false;
  }
}

}  // namespace

extern "C" {

int kd_abi_version(void) { return KD_NATIVE_ABI; }

kd_channel* kd_channel_new(const char* target, int tls, const char* ca, size_t ca_len,
                           const char* cert, size_t cert_len, const char* key, size_t key_len,
                           const char* server_name, const char* const* arg_keys,
                           const char* const* arg_values, size_t n_args, char* err,
                           size_t err_len) {
  if (target == nullptr || *target == '\0') {
    Copy("no target", err, err_len);
    return nullptr;
  }
  grpc::ChannelArguments args;
  // The Python client's grpcio channel has no size limits either: the
  // daemon enforces its own (--max_message_mb).
  args.SetMaxReceiveMessageSize(-1);
  args.SetMaxSendMessageSize(-1);
  if (server_name != nullptr && *server_name != '\0') args.SetSslTargetNameOverride(server_name);
  for (size_t i = 0; i < n_args; ++i) {
    const char* k = arg_keys[i];
    const char* v = arg_values[i];
    if (k == nullptr || v == nullptr) continue;
    int as_int = 0;
    const char* end = v + std::strlen(v);
    auto [p, ec] = std::from_chars(v, end, as_int);
    if (ec == std::errc() && p == end && p != v) {
      args.SetInt(k, as_int);
    } else {
      args.SetString(k, v);
    }
  }
  std::shared_ptr<grpc::ChannelCredentials> creds;
  if (tls != 0) {
    if ((cert_len == 0) != (key_len == 0)) {
      Copy("a client certificate and its key go together", err, err_len);
      return nullptr;
    }
    grpc::SslCredentialsOptions o;
    if (ca_len > 0) o.pem_root_certs.assign(ca, ca_len);
    if (cert_len > 0) o.pem_cert_chain.assign(cert, cert_len);
    if (key_len > 0) o.pem_private_key.assign(key, key_len);
    creds = grpc::SslCredentials(o);
  } else {
    creds = grpc::InsecureChannelCredentials();
  }
  auto channel = grpc::CreateCustomChannel(target, creds, args);
  if (channel == nullptr) {
    Copy("gRPC could not create a channel", err, err_len);
    return nullptr;
  }
  auto* ch = new kd_channel;
  ch->channel = std::move(channel);
  ch->stub = std::make_unique<grpc::GenericStub>(ch->channel);
  return ch;
}

void kd_channel_free(kd_channel* ch) { delete ch; }

kd_call* kd_call_start(kd_channel* ch, const char* method, const void* req, size_t req_len,
                       const char* authorization, double timeout_s) {
  auto* call = new kd_call;
  if (ch == nullptr || method == nullptr) {
    call->status = grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, "no channel or method");
    call->done = true;
    return call;
  }
  if (authorization != nullptr && *authorization != '\0') {
    call->ctx.AddMetadata("authorization", authorization);
  }
  if (timeout_s > 0) call->ctx.set_deadline(After(timeout_s));
  // The request's bytes are the caller's (a Python bytes object it keeps
  // until kd_call_free): referenced, not copied.
  grpc::Slice slice(req, req_len, grpc::Slice::STATIC_SLICE);
  grpc::ByteBuffer request(&slice, 1);
  call->cq = ThisThreadsQueue();
  call->reader = ch->stub->PrepareUnaryCall(&call->ctx, method, request, call->cq);
  call->reader->StartCall();
  call->reader->Finish(&call->response, &call->status, call);
  return call;
}

int kd_call_wait(kd_call* call, double wait_s) {
  if (call == nullptr) return static_cast<int>(grpc::StatusCode::INVALID_ARGUMENT);
  const auto deadline = wait_s < 0 ? std::chrono::system_clock::time_point::max() : After(wait_s);
  while (!call->done) {
    if (!NextEvent(call, deadline)) return -1;
  }
  return static_cast<int>(call->status.error_code());
}

int kd_call_spin(kd_call* call, double spin_s) {
  if (call == nullptr) return static_cast<int>(grpc::StatusCode::INVALID_ARGUMENT);
  const auto end = std::chrono::steady_clock::now() +
                   std::chrono::duration_cast<std::chrono::steady_clock::duration>(
                       std::chrono::duration<double>(spin_s));
  while (!call->done) {
    // A deadline in the past: one poll of the queue's pollset, no sleep.
    if (!NextEvent(call, std::chrono::system_clock::time_point{}) &&
        std::chrono::steady_clock::now() >= end) {
      return -1;
    }
  }
  return static_cast<int>(call->status.error_code());
}

void kd_call_cancel(kd_call* call) {
  if (call != nullptr && !call->done) call->ctx.TryCancel();
}

const void* kd_call_data(kd_call* call, size_t* size) {
  if (call == nullptr || !call->done || !call->status.ok()) {
    if (size != nullptr) *size = 0;
    return nullptr;
  }
  if (call->response_slice.size() == 0 && call->response.Length() > 0) {
    // One slice as it arrived when it came whole (no copy); joined otherwise.
    if (!call->response.DumpToSingleSlice(&call->response_slice).ok()) {
      if (size != nullptr) *size = 0;
      return nullptr;
    }
  }
  if (size != nullptr) *size = call->response_slice.size();
  return call->response_slice.begin();
}

const char* kd_call_message(kd_call* call) {
  if (call == nullptr) return "";
  call->message = call->status.error_message();
  return call->message.c_str();
}

void kd_call_free(kd_call* call) {
  if (call == nullptr) return;
  if (!call->done) {
    call->ctx.TryCancel();
    kd_call_wait(call, -1);
  }
  delete call;
}

}  // extern "C"

// ---- streams ----

namespace {

// One asynchronous operation of a stream: its tag on the stream's queue.
struct Op {
  bool pending = false;
  bool ok = false;
};

}  // namespace

struct kd_stream {
  grpc::CompletionQueue cq;
  grpc::ClientContext ctx;
  std::unique_ptr<grpc::GenericClientAsyncReaderWriter> rw;
  Op start, write, read, writes_done, finish;
  grpc::ByteBuffer request, response;
  grpc::Slice response_slice;
  grpc::Status status;
  std::string message;
  bool ended = false;   // Finish came back: status says why
  bool queued = false;  // a request waits for the stream to start

  void Post() {
    write.pending = true;
    rw->Write(request, &write);
    read.pending = true;
    rw->Read(&response, &read);
  }

  bool Busy() const {
    return start.pending || write.pending || read.pending || writes_done.pending || finish.pending;
  }
  // One event from the queue, waiting until `deadline`; false on timeout.
  bool Pump(std::chrono::system_clock::time_point deadline) {
    void* tag = nullptr;
    bool ok = false;
    auto r = cq.AsyncNext(&tag, &ok, deadline);
    if (r != grpc::CompletionQueue::GOT_EVENT) return false;
    auto* op = static_cast<Op*>(tag);
    op->pending = false;
    op->ok = ok;
    return true;
  }
  void PumpWhile(bool (kd_stream::*busy)() const) {
    while ((this->*busy)()) Pump(std::chrono::system_clock::time_point::max());
  }
  // Ends the stream (every other operation over) and keeps its status; an
  // end without an error status still ended the exchange: UNAVAILABLE.
  void End(double wait_s) {
    if (ended) return;
    finish.pending = true;
    rw->Finish(&status, &finish);
    const auto deadline = After(wait_s);
    while (finish.pending) {
      if (!Pump(deadline)) {
        ctx.TryCancel();
        PumpWhile(&kd_stream::Busy);
      }
    }
    ended = true;
    if (status.ok()) {
      status = grpc::Status(grpc::StatusCode::UNAVAILABLE,
                            "kerneld: the daemon ended the call stream before this response");
    }
  }
};

extern "C" {

kd_stream* kd_stream_open(kd_channel* ch, const char* method, const char* authorization) {
  auto* s = new kd_stream;
  if (authorization != nullptr && *authorization != '\0') {
    s->ctx.AddMetadata("authorization", authorization);
  }
  s->rw = ch->stub->PrepareCall(&s->ctx, method, &s->cq);
  s->start.pending = true;
  s->rw->StartCall(&s->start);
  return s;
}

int kd_stream_send(kd_stream* s, const void* req, size_t req_len) {
  if (s->ended) return static_cast<int>(s->status.error_code());
  if (s->write.pending || s->read.pending || s->queued) {
    return static_cast<int>(grpc::StatusCode::FAILED_PRECONDITION);  // misuse: one at a time
  }
  s->response_slice = grpc::Slice();
  s->response.Clear();
  grpc::Slice slice(req, req_len, grpc::Slice::STATIC_SLICE);
  s->request = grpc::ByteBuffer(&slice, 1);
  // gRPC refuses a Write while StartCall's operation (sending the initial
  // metadata) is pending; a new stream's first request waits in kd_stream_wait,
  // which posts it once the stream has started (bounded by the caller's wait).
  if (s->start.pending) {
    s->queued = true;
  } else {
    s->Post();
  }
  return 0;
}

int kd_stream_wait(kd_stream* s, double spin_s, double wait_s, int* sent) {
  if (sent != nullptr) *sent = 0;
  if (s->ended) return static_cast<int>(s->status.error_code());
  const auto spin_end = std::chrono::steady_clock::now() +
                        std::chrono::duration_cast<std::chrono::steady_clock::duration>(
                            std::chrono::duration<double>(spin_s > 0 ? spin_s : 0));
  const auto deadline = wait_s < 0 ? std::chrono::system_clock::time_point::max() : After(wait_s);
  bool spinning = spin_s > 0;
  while (s->start.pending || s->write.pending || s->read.pending || s->queued) {
    if (s->queued && !s->start.pending) {
      if (!s->start.ok) break;  // never started: the request did not go out
      s->queued = false;
      s->Post();
      continue;
    }
    if (spinning) {
      // A deadline in the past: one poll, no sleep.
      if (!s->Pump(std::chrono::system_clock::time_point{}) &&
          std::chrono::steady_clock::now() >= spin_end) {
        spinning = false;
      }
    } else if (!s->Pump(deadline)) {
      return -1;
    }
  }
  if (s->queued || !s->start.ok || !s->write.ok || !s->read.ok) {
    if (sent != nullptr) *sent = !s->queued && s->start.ok && s->write.ok ? 1 : 0;
    s->queued = false;
    s->End(1.0);
    return static_cast<int>(s->status.error_code());
  }
  if (sent != nullptr) *sent = 1;
  return 0;
}

const void* kd_stream_data(kd_stream* s, size_t* size) {
  if (s->ended || s->read.pending || !s->read.ok) {
    if (size != nullptr) *size = 0;
    return nullptr;
  }
  if (s->response_slice.size() == 0 && s->response.Length() > 0 &&
      !s->response.DumpToSingleSlice(&s->response_slice).ok()) {
    if (size != nullptr) *size = 0;
    return nullptr;
  }
  if (size != nullptr) *size = s->response_slice.size();
  return s->response_slice.begin();
}

const char* kd_stream_message(kd_stream* s) {
  s->message = s->ended ? s->status.error_message() : std::string();
  return s->message.c_str();
}

void kd_stream_cancel(kd_stream* s) {
  if (!s->ended) s->ctx.TryCancel();
}

void kd_stream_free(kd_stream* s) {
  if (s == nullptr) return;
  if (!s->ended) {
    s->queued = false;
    if (s->start.pending || s->write.pending || s->read.pending) {
      s->ctx.TryCancel();  // an unfinished exchange: nothing more will be read
      s->PumpWhile(&kd_stream::Busy);
    } else if (s->start.ok) {
      // Idle: tell the daemon we are done, so the stream ends cleanly.
      s->writes_done.pending = true;
      s->rw->WritesDone(&s->writes_done);
      const auto deadline = After(1.0);
      while (s->writes_done.pending) {
        if (!s->Pump(deadline)) {
          s->ctx.TryCancel();
          s->PumpWhile(&kd_stream::Busy);
        }
      }
    }
    s->End(1.0);
  }
  s->cq.Shutdown();
  void* tag;
  bool ok;
  while (s->cq.Next(&tag, &ok)) {
  }
  delete s;
}

}  // extern "C"
