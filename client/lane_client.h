// The same-host lane's C++ client (docs/lane.md): Execute through a ring of
// shared-memory slots instead of gRPC, for a client on the daemon's host.
//
//   grpc::Status st;
//   auto lane = kerneld::client::LaneClient::Connect("/run/kerneld/lane.sock", "", &st);
//   if (!lane) ...  // no lane: say so, or use KernelClient (gRPC) explicitly
//   v1::ExecuteResponse resp;
//   st = lane->Execute(req, &resp);
//
// The request and response are the gRPC API's ExecuteRequest and
// ExecuteResponse, and they get the same answers. One LaneClient may be
// used from several threads: each call takes a free slot (up to the
// daemon's --lane_slots at once; more wait for one).
#pragma once

#include <grpcpp/grpcpp.h>

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

#include "kerneld/v1/kerneld.pb.h"
#include "lane_ring.h"

namespace kerneld::client {

namespace v1 = ::kerneld::v1;

class LaneClient {
 public:
  // Connects to the lane socket at `path` ("unix:" prefix allowed) with a
  // bearer token ("": the connection's uid is the principal). Null, with
  // *error saying why, when there is no lane there or the daemon refused it.
  static std::unique_ptr<LaneClient> Connect(const std::string& path, const std::string& token,
                                             grpc::Status* error);
  ~LaneClient();
  LaneClient(const LaneClient&) = delete;
  LaneClient& operator=(const LaneClient&) = delete;

  grpc::Status Execute(const v1::ExecuteRequest& req, v1::ExecuteResponse* resp,
                       std::chrono::milliseconds timeout = std::chrono::milliseconds{0});
  // Execute with the request already serialized: *out gets the response's
  // bytes on OK (tests and benchmarks; any bytes may be sent).
  grpc::Status ExecuteBytes(std::string_view request, std::string* out,
                            std::chrono::milliseconds timeout = std::chrono::milliseconds{0});

  uint32_t slots() const { return ring_->slots(); }
  uint64_t slot_bytes() const { return ring_->slot_bytes(); }
  // The ring as mapped here, and its memfd (tests of a hostile client).
  void* ring() const { return ring_->ring(); }
  int memfd() const { return ring_->memfd(); }
  // How long a waiting call polls its slot before it sleeps, at least (it
  // adapts upwards when answers come just after it slept).
  void set_spin(std::chrono::microseconds spin) { ring_->set_spin_ns(spin.count() * 1000); }

 private:
  explicit LaneClient(std::unique_ptr<LaneRing> ring) : ring_(std::move(ring)) {}
  // The protocol itself, without the messages (lane_ring.h).
  std::unique_ptr<LaneRing> ring_;
};

}  // namespace kerneld::client
