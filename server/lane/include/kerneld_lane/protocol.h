// The same-host lane's wire format (docs/lane.md), shared by the daemon
// (server/lane/) and the clients (client/lane_client.h). No gRPC, no
// protobuf: a slot carries a serialized kerneld.v1.ExecuteRequest or
// ExecuteResponse as bytes.
//
// Set-up, on a SOCK_SEQPACKET unix socket (--lane_socket):
//   client -> daemon  Hello: kHelloMagic, kVersion, token length, token bytes
//   daemon -> client  Welcome: kWelcomeMagic, status code, slots, slot bytes,
//                     ring bytes, message; with the ring's memfd (SCM_RIGHTS)
//                     when the status is 0.
// The socket then stays open and carries nothing: its end (close, exit,
// SIGKILL) is how the daemon learns that the client is gone.
//
// The ring (a sealed memfd: neither side can shrink or grow it):
//   [RingHeader, one page][Slot 0: SlotHeader + slot bytes][Slot 1] ...
// A slot's state word is its handshake and its futex:
//   kFree --client writes the request, then--> kRequest
//   kRequest --daemon copies it out--> kRunning --daemon writes--> kResponse
//   kResponse --client reads the response--> kFree
// The daemon copies a request (header fields and bytes) into its own memory
// once, before it parses anything, and never reads the slot again.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>

namespace kerneld::lane {

inline constexpr uint32_t kHelloMagic = 0x314e4c4b;    // "KLN1"
inline constexpr uint32_t kWelcomeMagic = 0x574e4c4b;  // "KLNW"
inline constexpr uint32_t kRingMagic = 0x524e4c4b;     // "KLNR"
inline constexpr uint32_t kVersion = 1;
inline constexpr uint32_t kMaxTokenBytes = 4096;
inline constexpr uint32_t kMaxMessageBytes = 1024;
inline constexpr size_t kRingHeaderBytes = 4096;
// Bounds the daemon accepts for --lane_slots and --lane_slot_kb.
inline constexpr uint32_t kMaxSlots = 256;
inline constexpr uint32_t kMaxSlotBytes = 64u << 20;

enum SlotState : uint32_t { kFree = 0, kRequest = 1, kRunning = 2, kResponse = 3 };

struct Hello {
  uint32_t magic = kHelloMagic;
  uint32_t version = kVersion;
  uint32_t token_bytes = 0;  // the bearer token follows, as on gRPC's authorization
  uint32_t reserved = 0;
};

struct Welcome {
  uint32_t magic = kWelcomeMagic;
  uint32_t version = kVersion;
  int32_t code = 0;  // a gRPC status code; 0: the ring's fd comes with it
  uint32_t slots = 0;
  uint64_t slot_bytes = 0;  // payload bytes of one slot
  uint64_t ring_bytes = 0;  // the memfd's size
  uint32_t message_bytes = 0;
  uint32_t reserved = 0;
  char message[kMaxMessageBytes] = {};  // why, when code is not 0
};

// Page 0 of the ring. The daemon writes the first four fields once; the
// clients' copy of slots/slot_bytes comes from the Welcome, never from here.
struct alignas(64) RingHeader {
  uint32_t magic, version, slots, reserved;
  uint64_t slot_bytes;
  // The client adds 1 after it marks a slot kRequest, and wakes the daemon
  // (FUTEX_WAKE) if daemon_sleeping is 1.
  alignas(64) std::atomic<uint32_t> doorbell;
  alignas(64) std::atomic<uint32_t> daemon_sleeping;
  // 1 once the daemon takes no more requests on this lane (drain, shutdown).
  alignas(64) std::atomic<uint32_t> closed;
};
static_assert(sizeof(RingHeader) <= kRingHeaderBytes);

struct alignas(64) SlotHeader {
  std::atomic<uint32_t> state;  // SlotState; futex word for the client's wait
  // 1 while the client sleeps on state (FUTEX_WAIT): the daemon wakes it.
  std::atomic<uint32_t> client_waiting;
  uint64_t request_id;      // client's; echoed in the response
  uint64_t request_bytes;   // client: the request's length (<= slot bytes)
  uint64_t timeout_us;      // client: the request's deadline from now; 0: none
  uint64_t response_bytes;  // daemon: the response's length
  int32_t status_code;      // daemon: 0, or a gRPC status code
  uint32_t reserved;
};
static_assert(sizeof(SlotHeader) == 64);

// A slot's header + payload, rounded to 64 bytes.
inline constexpr uint64_t SlotStride(uint64_t slot_bytes) {
  return sizeof(SlotHeader) + ((slot_bytes + 63) & ~uint64_t{63});
}
inline constexpr uint64_t RingBytes(uint32_t slots, uint64_t slot_bytes) {
  return kRingHeaderBytes + uint64_t{slots} * SlotStride(slot_bytes);
}
inline SlotHeader* SlotAt(void* ring, uint64_t slot_bytes, uint32_t i) {
  return reinterpret_cast<SlotHeader*>(static_cast<char*>(ring) + kRingHeaderBytes +
                                       uint64_t{i} * SlotStride(slot_bytes));
}
inline char* SlotPayload(SlotHeader* s) { return reinterpret_cast<char*>(s + 1); }

}  // namespace kerneld::lane
