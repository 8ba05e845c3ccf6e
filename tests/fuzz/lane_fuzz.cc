// lane_fuzz: arbitrary bytes in a same-host lane's slot (docs/lane.md), the
// doorbell rung, against a real daemon in this process (the CPU backend,
// a lane socket, no TCP). The input's first byte picks which header fields
// it also sets (bit 0: the request's length, from the next 8 bytes, however
// large; bit 1: its timeout; bit 2: the slot's state is set to kRequest
// again while the daemon runs it, as a hostile client would); the rest is
// the slot's payload. Checked: every request is answered, with a gRPC code,
// a response length within the slot, and an ExecuteResponse when OK; the
// daemon stays up (a crash, a leak or a hang is the harness's failure).
#include <google/protobuf/stubs/logging.h>
#include <unistd.h>

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <memory>
#include <string>

#include "config.h"
#include "daemon.h"
#include "kerneld/v1/kerneld.pb.h"
#include "kerneld_lane/futex.h"
#include "kerneld_lane/protocol.h"
#include "lane_client.h"

namespace {

using namespace kerneld;

struct Fixture {
  std::string dir;
  server::Config cfg;
  std::unique_ptr<server::Daemon> daemon;
  std::unique_ptr<client::LaneClient> lane;

  Fixture() {
    char tmpl[] = "/tmp/kerneld-lane-fuzz-XXXXXX";
    dir = mkdtemp(tmpl);
    cfg.listen = "unix:" + dir + "/grpc.sock";
    cfg.metrics_listen = "off";
    cfg.lane_socket = dir + "/lane.sock";
    cfg.lane_slots = 2;
    cfg.lane_slot_kb = 64;
    cfg.enable_cuda = false;
    cfg.cpu_workers = 1;
    daemon = std::make_unique<server::Daemon>(cfg);
    if (std::string err = daemon->Start(); !err.empty()) {
      std::fprintf(stderr, "lane_fuzz: %s\n", err.c_str());
      std::abort();
    }
    // The daemon routes protobuf's log to its own; unparsable requests
    // are expected here, by the thousand: quiet.
    google::protobuf::SetLogHandler(nullptr);
    grpc::Status st;
    lane = client::LaneClient::Connect(cfg.lane_socket, "", &st);
    if (!lane) {
      std::fprintf(stderr, "lane_fuzz: %s\n", st.error_message().c_str());
      std::abort();
    }
  }
};

uint64_t Take64(const uint8_t*& data, size_t& size) {
  uint64_t v = 0;
  const size_t n = size < 8 ? size : 8;
  std::memcpy(&v, data, n);
  data += n;
  size -= n;
  return v;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static Fixture* f = new Fixture();  // one daemon for the whole run
  if (size == 0) return 0;
  const uint8_t flags = data[0];
  ++data;
  --size;
  const uint64_t slot_bytes = f->lane->slot_bytes();
  const uint64_t claimed = (flags & 1) ? Take64(data, size) : size;
  const uint64_t timeout_us = (flags & 2) ? Take64(data, size) : 0;
  if (size > slot_bytes) size = static_cast<size_t>(slot_bytes);
  auto* s = lane::SlotAt(f->lane->ring(), slot_bytes, 0);
  auto* h = static_cast<lane::RingHeader*>(f->lane->ring());
  std::memcpy(lane::SlotPayload(s), data, size);
  s->request_id = 1;
  s->request_bytes = claimed;
  s->timeout_us = timeout_us;
  s->state.store(lane::kRequest);
  h->doorbell.fetch_add(1);
  lane::FutexWakeAll(&h->doorbell);
  if (flags & 4) {
    // Rung again while it runs: the daemon must answer it once, not twice.
    while (s->state.load() == lane::kRequest) {
    }
    uint32_t running = lane::kRunning;
    s->state.compare_exchange_strong(running, lane::kRequest);
    h->doorbell.fetch_add(1);
    lane::FutexWakeAll(&h->doorbell);
  }
  s->client_waiting.store(1);  // the daemon wakes this thread when it answers
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(8);
  while (s->state.load() != lane::kResponse) {
    if (std::chrono::steady_clock::now() > deadline) __builtin_trap();  // never answered
    lane::FutexWait(&s->state, s->state.load(), 1000000);
  }
  if (s->status_code < 0 || s->status_code > 16) __builtin_trap();
  if (s->response_bytes > slot_bytes) __builtin_trap();
  if (s->status_code == 0) {
    kerneld::v1::ExecuteResponse resp;
    if (!resp.ParseFromArray(lane::SlotPayload(s), static_cast<int>(s->response_bytes)))
      __builtin_trap();
  }
  s->client_waiting.store(0);
  s->state.store(lane::kFree);
  return 0;
}
