#include "native_lane.h"

#include <algorithm>
#include <climits>
#include <cmath>
#include <cstring>
#include <memory>
#include <string>

#include "lane_ring.h"

struct kd_lane {
  std::unique_ptr<kerneld::client::LaneRing> ring;
};

namespace {

using kerneld::client::LaneRing;
using kerneld::client::LaneStatus;

// The last answer of this thread: what *resp points into.
thread_local std::string t_answer;

int64_t Nanos(double seconds) {
  if (!(seconds >= 0)) return -1;  // negative or NaN: no limit
  if (seconds > 9.0e9) return INT64_MAX;
  return static_cast<int64_t>(std::llround(seconds * 1e9));
}

int Result(LaneRing::Wait w, LaneStatus& st, const void** resp, size_t* resp_len) {
  if (w == LaneRing::Wait::kPending) return -1;
  if (!st.ok()) t_answer = std::move(st.message);
  *resp = t_answer.data();
  *resp_len = t_answer.size();
  if (w == LaneRing::Wait::kNotTaken) return -2;
  return st.code;
}

}  // namespace

extern "C" {

kd_lane* kd_lane_connect(const char* path, const char* token, size_t token_len, int* code,
                         char* err, size_t err_len) {
  LaneStatus st;
  auto ring = LaneRing::Connect(path != nullptr ? path : "",
                                std::string(token != nullptr ? token : "", token_len), &st);
  if (code != nullptr) *code = st.code;
  if (!ring) {
    if (err != nullptr && err_len > 0) {
      const size_t n = std::min(st.message.size(), err_len - 1);
      std::memcpy(err, st.message.data(), n);
      err[n] = '\0';
    }
    return nullptr;
  }
  return new kd_lane{std::move(ring)};
}

void kd_lane_free(kd_lane* lane) { delete lane; }

uint32_t kd_lane_slots(kd_lane* lane) { return lane->ring->slots(); }

uint64_t kd_lane_slot_bytes(kd_lane* lane) { return lane->ring->slot_bytes(); }

void kd_lane_set_spin(kd_lane* lane, double spin_s) {
  lane->ring->set_spin_ns(std::max<int64_t>(0, Nanos(spin_s)));
}

int kd_lane_call(kd_lane* lane, const void* req, size_t req_len, double timeout_s, double wait_s,
                 int* slot, const void** resp, size_t* resp_len) {
  LaneStatus st;
  const int64_t timeout_ns = timeout_s > 0 ? Nanos(timeout_s) : 0;
  const int64_t timeout_us = timeout_ns == INT64_MAX ? INT64_MAX / 1000 : (timeout_ns + 999) / 1000;
  const int s =
      lane->ring->Submit(std::string_view(static_cast<const char*>(req), req_len), timeout_us, &st);
  if (s < 0) return Result(LaneRing::Wait::kFailed, st, resp, resp_len);
  *slot = s;
  return Result(lane->ring->Await(s, Nanos(wait_s), &st, &t_answer), st, resp, resp_len);
}

int kd_lane_wait(kd_lane* lane, int slot, double wait_s, const void** resp, size_t* resp_len) {
  LaneStatus st;
  if (slot < 0 || static_cast<uint32_t>(slot) >= lane->ring->slots()) {
    st = {3, "kd_lane_wait: no slot " + std::to_string(slot)};
    return Result(LaneRing::Wait::kFailed, st, resp, resp_len);
  }
  return Result(lane->ring->Await(slot, Nanos(wait_s), &st, &t_answer), st, resp, resp_len);
}

void kd_lane_abandon(kd_lane* lane, int slot) { lane->ring->Abandon(slot); }

}  // extern "C"
