// Daemon configuration: one struct, filled from flags and the environment.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace kerneld::server {

struct Config {
  std::string listen = "127.0.0.1:50051";         // host:port or unix:/path; repeatable
  std::vector<std::string> extra_listen;          // further --listen values
  std::string metrics_listen = "127.0.0.1:9400";  // "" or "off": no exposer
  int log_level = 0;
  std::string log_format = "text";  // or "json"
  std::string log_file;             // "" = stderr
  std::string trace_file;           // workload capture (JSON lines)
  double trace_sample_rate = 1.0;
  int max_message_mb = 256;
  int max_inflight_mb = 4096;         // request bytes held at once (inline in + out)
  int max_graph_steps = 256;          // steps one ExecuteGraph may have (docs/graphs.md)
  int graph_cache_entries = 64;       // CUDA graphs cached per GPU stream; 0: no replay
  int cpu_workers = 2;                // requests the CPU runs concurrently
  int cuda_streams = 4;               // requests one GPU runs concurrently (a thread each)
  int cpu_threads = 0;                // intra-op threads; 0 = hardware concurrency
  int queue_capacity = 1024;          // per device; full -> RESOURCE_EXHAUSTED
  int worker_spin_us = 0;             // idle device threads poll this long before sleeping
  std::string grpc_api = "sync";      // every RPC on gRPC's "sync" or "callback" API
  int grpc_sync_pollers = 0;          // sync API's MAX_POLLERS; 0 = automatic (daemon.cc)
  std::string gpu_timing = "host";    // execute_ns of GPU work: "host" span or CUDA "events"
  int adaptive_spin_us = 0;           // ...or this long, while tasks arrived recently
  int inline_max_kb = 64;             // small requests run on the receiving thread; -1: never
  int inline_max_us = 100;            // ...if their op recently ran at most this long there
  int stream_window = 64;             // in-flight + unwritten requests per ExecuteStream
  int stream_buffer_mb = 64;          // request + response bytes one ExecuteStream holds
  // How many streams may be open (docs/api.md, "Limits on streams"): an idle
  // ExecuteStream costs ~18 KiB, and without limits one client opened 100,000.
  int max_streams_per_connection = 256;  // HTTP/2 concurrent streams (calls) per connection
  int64_t max_streams = 4096;            // open ExecuteStreams, daemon-wide; 0: no limit
  int64_t quota_streams = 1024;          // open ExecuteStreams per principal; 0: no limit
  double drain_timeout_s = 30;           // SIGTERM: finish in-flight work within this
  // The same-host lane (docs/lane.md): a unix socket that hands each client
  // a shared-memory ring of request/response slots; "" is off.
  std::string lane_socket;
  int lane_slots = 8;          // slots per lane: requests one client has in flight
  int lane_slot_kb = 256;      // bytes of one slot (request or response)
  int lane_spin_us = 50;       // a busy lane's thread polls this long before it sleeps
  int max_lanes = 256;         // lanes open at once, daemon-wide
  int quota_lanes = 64;        // lanes one uid holds at once; 0: no limit
  bool enable_cuda = true;               // false: serve from the CPU even with a GPU
  std::string ready_file;                // written with the bound addresses once serving
  bool enable_test_ops = false;          // serve the "_test_*" ops (tests only)
  bool allow_client_buffers = false;     // client buffers even when not on loopback
  // Identity and isolation (docs/security.md).
  std::vector<std::string> tls_listen;  // TLS addresses (repeatable)
  std::string tls_cert, tls_key;        // PEM files of the server's certificate and key
  std::string tls_client_ca;            // PEM CA bundle: client certificates required (mTLS)
  bool allow_insecure_remote = false;   // plaintext --listen beyond loopback / unix
  std::string auth_tokens;              // token file (TOKEN PRINCIPAL ROLE ...), SIGHUP re-reads
  // Per-principal quotas; 0: none. A Config{} has none; ParseFlags gives
  // each one not named on the command line its host-sized default
  // (HostQuotaDefaults).
  int64_t quota_bytes = 0;     // registered + allocated
  int64_t quota_buffers = 0;   // buffers held
  int64_t quota_inflight = 0;  // requests in flight
  double rate_limit = 0;       // requests/s per principal (token bucket); 0: none
  // User kernels (docs/user-kernels.md): CUDA source registered over
  // AdminService, run in a sandbox worker process per GPU.
  std::string allow_user_kernels;               // "": off; "admin" (a bare flag), "admin,user"
  std::string user_kernel_visibility = "own";   // own | all: who sees a principal's kernels
  int user_kernel_timeout_ms = 1000;            // a launch running longer: DEADLINE_EXCEEDED
  int user_kernel_compiles_per_minute = 30;     // per principal; 0: no limit
  int max_user_kernels = 64;                    // registered at once, per principal
  std::string user_kernel_arch = "sm_90";       // compiled for, on a host without a GPU
  // Buffers of plaintext TCP callers without a token: "connection" (private
  // to the connection that registered them, released when it closes) or
  // "shared" (one principal, "anonymous", for every such caller).
  std::string anonymous_buffers = "connection";
  // The nvrtc backend's JIT (docs/jit.md).
  std::string jit = "async";    // async | sync | off
  std::string jit_cache_dir;    // "": $XDG_CACHE_HOME/kerneld/jit, else ~/.cache/kerneld/jit
  int jit_cache_max_mb = 1024;  // the cache's size cap, least recently used evicted; 0: none
  std::string jit_warm;         // a file of "op dtype shape [arch]" lines compiled at start
  // Set: compile the --jit_warm list for this arch ("sm_90") into the cache
  // and exit, without a GPU (jit/jit_setup.h, PrecompileJit).
  std::string jit_precompile_arch;
  int jit_precompile_sms = 0;  // the SM count the plans assume (0: unknown)
  // The scheduler (docs/architecture.md, "Scheduling"): implementations
  // ranked by measured latency per shape bucket, and request priorities.
  std::string tuning = "frozen";  // online | frozen | off
  std::string tuning_file;        // the table: loaded at start, written at exit ("": none)
  int tuning_explore_runs = 3;    // runs of each eligible impl in a new bucket (online)
  int tuning_recheck_every = 1000;  // a settled bucket re-times another impl once per N
  int tuning_max_buckets = 4096;    // buckets the table holds; new ones past it rank statically
  int priority_aging_ms = 10;       // a waiting request gains one priority level per this
};

// The quotas a daemon gets when no flag names them: a quarter of the host's
// memory in bytes, a quarter of the 4096 shared-memory mappings kerneld keeps,
// and one device queue's worth of requests in flight (--queue_capacity).
// One principal alone cannot take everything; a single user rarely notices.
struct HostQuotaDefaults {
  int64_t bytes, buffers, inflight;
};
HostQuotaDefaults DefaultQuotas(const Config& cfg);

// Whether a --listen address is loopback or a unix socket (plaintext there
// is only visible to this machine).
bool IsLocalAddress(const std::string& addr);
// "1048576", "64K", "512M", "2G" (powers of 1024) into *out; false if bad.
bool ParseByteSize(const std::string& s, int64_t* out);

// Parses argv into cfg. Returns "" on success, else a message for the user.
// Sets *help when --help was asked for.
std::string ParseFlags(int argc, char** argv, Config* cfg, bool* help);
std::string FlagsHelp();

}  // namespace kerneld::server
