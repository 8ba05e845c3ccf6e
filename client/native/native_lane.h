// libkerneld_native's same-host lane (docs/lane.md): the Python client's
// Client(..., lane=True) sends its Execute requests through these
// functions instead of gRPC.
//
// Why C and not Python over the ring: the protocol needs atomic
// read-modify-writes and a full fence (the doorbell's fetch_add, then the
// daemon's "sleeping" word), futex calls, and a busy-poll that must not hold
// the GIL; ctypes drops the GIL for the whole of each call below. The ring
// code is the C++ client's own (client/lane_ring.h), without gRPC or
// protobuf: requests and responses cross as serialized bytes, as in
// native_call.h.
//
// Return values of kd_lane_call and kd_lane_wait:
//   0    the response is in: *resp, *resp_len are the ExecuteResponse bytes
//  > 0   a gRPC status code: *resp, *resp_len are its message (UTF-8)
//  -1    still pending after wait_s: *slot names it; call kd_lane_wait again
//        (or kd_lane_abandon)
//  -2    the daemon closed the lane before it took the request (it never
//        ran): *resp is why; the request may be sent on a new lane
// *resp stays valid until this thread's next kd_lane_call or kd_lane_wait.
#pragma once

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct kd_lane kd_lane;

// Connects to the lane socket at path ("unix:" prefix allowed) with a bearer
// token (token_len 0: the connection's uid is the principal). NULL when
// there is no lane or the daemon refused it: *code is the gRPC code and err
// (err_len bytes, NUL-terminated) says why.
kd_lane* kd_lane_connect(const char* path, const char* token, size_t token_len, int* code,
                         char* err, size_t err_len);
// Frees the lane. No call may be in flight on it.
void kd_lane_free(kd_lane* lane);
// Slots (requests in flight at once) and bytes of one slot.
uint32_t kd_lane_slots(kd_lane* lane);
uint64_t kd_lane_slot_bytes(kd_lane* lane);
// The least a waiting call polls before it sleeps (it adapts upwards).
void kd_lane_set_spin(kd_lane* lane, double spin_s);

// Sends one serialized ExecuteRequest (copied into a slot; waits for a free
// slot while all are in flight) and waits up to wait_s (< 0: until done)
// for its answer. timeout_s > 0: the request's deadline (the daemon does not
// run it later; the call ends DEADLINE_EXCEEDED then).
int kd_lane_call(kd_lane* lane, const void* req, size_t req_len, double timeout_s, double wait_s,
                 int* slot, const void** resp, size_t* resp_len);
// Waits up to wait_s more for slot's answer (after kd_lane_call returned -1).
int kd_lane_wait(kd_lane* lane, int slot, double wait_s, const void** resp, size_t* resp_len);
// Gives up on slot (after -1): it is reused once its answer comes.
void kd_lane_abandon(kd_lane* lane, int slot);

#ifdef __cplusplus
}  // extern "C"
#endif
