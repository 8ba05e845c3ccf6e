// libkerneld_native: a C ABI over gRPC C++ for the Python client's calls
// (client/python/kerneld/_native.py loads it with ctypes).
//
// Why it exists: grpcio's synchronous API hands every call to its own
// threads (a request-consumer thread, the channel's spin thread) and back,
// which costs the Python client 90-200 us over kernelctl a call (docs/
// performance.md). Here a call is started and waited for on the caller's own
// thread, on a completion queue of that thread, as kernelctl's are; ctypes
// drops the GIL for the wait. Messages cross as serialized bytes: this
// library links gRPC only, never protobuf (no second protobuf runtime beside
// Python's).
//
// Every function is safe to call from any thread, but a call is waited for
// and freed on the thread that started it (its completion queue is that
// thread's). Strings are NUL-terminated UTF-8; byte ranges are (pointer,
// length) and are only read during the function that takes them, except a
// request's bytes, which must stay valid until the call is freed.
#pragma once

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define KD_NATIVE_ABI 2

typedef struct kd_channel kd_channel;
typedef struct kd_call kd_call;

// KD_NATIVE_ABI of the library; a client checks it before anything else.
int kd_abi_version(void);

// A channel to `target` ("host:port", "unix:/path", any gRPC target).
// tls != 0: TLS, verified against ca (PEM, or the system's roots when
// ca_len is 0), with a client certificate when cert_len and key_len are set.
// server_name: overrides the name checked in the daemon's certificate ("" for
// none). args: n_args (key, value) pairs of channel arguments; a value that
// parses fully as a decimal integer is set as an integer. Message sizes are
// unlimited unless args say otherwise. On failure returns NULL and writes why
// into err (err_len bytes, NUL-terminated).
kd_channel* kd_channel_new(const char* target, int tls, const char* ca, size_t ca_len,
                           const char* cert, size_t cert_len, const char* key, size_t key_len,
                           const char* server_name, const char* const* arg_keys,
                           const char* const* arg_values, size_t n_args, char* err, size_t err_len);
void kd_channel_free(kd_channel* ch);

// Starts a unary call of `method` ("/pkg.Service/Method") with the
// serialized request (req, req_len: not copied; keep it alive until
// kd_call_free). authorization: the metadata value to send as
// "authorization" (NULL or "" for none). timeout_s > 0 sets a deadline.
// Never NULL: a call that could not start completes with its status.
kd_call* kd_call_start(kd_channel* ch, const char* method, const void* req, size_t req_len,
                       const char* authorization, double timeout_s);

// Waits up to wait_s seconds (< 0: until done) for the call. Returns its gRPC
// status code (0 OK) once done, or -1 while it is still running.
int kd_call_wait(kd_call* call, double wait_s);

// Like kd_call_wait, but busy-polls the thread's queue (never sleeps) for up
// to spin_s seconds: the thread stays on its core, so a response that comes
// within spin_s is seen without a wake-up. Returns -1 when spin_s passed.
int kd_call_spin(kd_call* call, double spin_s);

// Asks the daemon to cancel the call; kd_call_wait then returns CANCELLED
// (1) or the status that came first.
void kd_call_cancel(kd_call* call);

// After kd_call_wait returned a code: the response's bytes (valid until
// kd_call_free; size 0 on error) and the status message ("" when OK).
const void* kd_call_data(kd_call* call, size_t* size);
const char* kd_call_message(kd_call* call);

// Frees the call. One still running is cancelled and waited for first.
void kd_call_free(kd_call* call);

// ---- a bidirectional stream, one request and one response at a time ----
//
// kerneld's ExecuteStream skips the per-call setup of a unary RPC (a new
// HTTP/2 stream, headers, trailers). The Python client keeps one per thread
// that calls, so a stream never has two requests in flight and needs no
// matching of responses. A stream has its own completion queue: any thread
// may use or free it, one at a time.
typedef struct kd_stream kd_stream;

// Opens `method` on ch with the "authorization" metadata (NULL or "" for
// none). Never NULL; a stream that could not open fails its first exchange.
kd_stream* kd_stream_open(kd_channel* ch, const char* method, const char* authorization);

// Sends one serialized request (not copied: keep it alive until the
// exchange is over) and posts the read of one response. Returns 0, or the
// stream's gRPC status code when it has already ended.
int kd_stream_send(kd_stream* s, const void* req, size_t req_len);

// Waits for the exchange: busy-polls up to spin_s, then sleeps up to
// wait_s (< 0: until done). Returns 0 when the response is in, -1 when the
// time passed first, or the stream's gRPC status code (> 0) when it ended:
// then *sent tells whether the request went out before it did (0: it never
// reached the daemon, and may be sent again on a new stream).
int kd_stream_wait(kd_stream* s, double spin_s, double wait_s, int* sent);

// After kd_stream_wait returned 0: the response's bytes (valid until the
// next kd_stream_send or kd_stream_free). After it returned > 0: the status
// message.
const void* kd_stream_data(kd_stream* s, size_t* size);
const char* kd_stream_message(kd_stream* s);

// Cancels the stream (a request in flight is cancelled in the daemon); the
// exchange then ends with CANCELLED. Free it afterwards.
void kd_stream_cancel(kd_stream* s);

// Ends the stream (cancelled when an exchange is unfinished) and frees it.
void kd_stream_free(kd_stream* s);

#ifdef __cplusplus
}  // extern "C"
#endif
