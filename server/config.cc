#include "config.h"

#include <unistd.h>

#include <cstdlib>
#include <functional>
#include <map>

#include "absl/strings/numbers.h"
#include "kerneld/status.h"

namespace kerneld::server {

namespace {

// Rejects out-of-range values (strtol into an int wrapped 4294967297 to 1).
bool ParseInt(const std::string& s, int* out) { return absl::SimpleAtoi(s, out); }

bool ParseBool(const std::string& s, bool* out) {
  if (s == "1" || s == "true" || s == "yes") return *out = true, true;
  if (s == "0" || s == "false" || s == "no") return *out = false, true;
  return false;
}

}  // namespace

HostQuotaDefaults DefaultQuotas(const Config& cfg) {
  const long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGE_SIZE);
  const int64_t memory = pages > 0 && page > 0 ? static_cast<int64_t>(pages) * page : (16LL << 30);
  return {memory / 4, 1024, cfg.queue_capacity};
}

bool IsLocalAddress(const std::string& addr) {
  if (addr.rfind("unix:", 0) == 0 || addr.rfind("unix-abstract:", 0) == 0) return true;
  std::string host = addr.substr(0, addr.rfind(':'));
  if (host.rfind("ipv4:", 0) == 0) host = host.substr(5);
  return host.rfind("127.", 0) == 0 || host == "localhost" || host == "[::1]" || host == "::1";
}

bool ParseByteSize(const std::string& s, int64_t* out) {
  if (s.empty()) return false;
  int shift = 0;
  std::string digits = s;
  switch (s.back()) {
    case 'K':
    case 'k':
      shift = 10;
      break;
    case 'M':
    case 'm':
      shift = 20;
      break;
    case 'G':
    case 'g':
      shift = 30;
      break;
    case 'T':
    case 't':
      shift = 40;
      break;
    default:
      break;
  }
  if (shift != 0) digits.pop_back();
  int64_t v = 0;
  if (!absl::SimpleAtoi(digits, &v) || v < 0) return false;
  if (v > (INT64_MAX >> shift)) return false;
  *out = v << shift;
  return true;
}

std::string FlagsHelp() {
  return R"(kerneld: a GPU kernel daemon behind gRPC.

  --listen=ADDR          host:port or unix:/path (default 127.0.0.1:50051; repeatable;
                         port 0 picks a free port, see --ready_file)
  --lane_socket=PATH     serve the same-host lane on this unix socket (docs/lane.md):
                         shared-memory request slots, no gRPC; default off
  --lane_slots=N         slots (requests in flight) per lane (default 8; 1..256)
  --lane_slot_kb=N       bytes of one slot, request or response (default 256; 4..65536)
  --lane_spin_us=N       a busy lane polls this long before it sleeps (default 50)
  --max_lanes=N          lanes open at once (default 256)
  --quota_lanes=N        lanes one uid may hold at once (default 64; 0: no limit)
  --metrics_listen=ADDR  Prometheus /metrics endpoint (default 127.0.0.1:9400; "off")
  --log_level=N          0 off, 1 one line per request, 3 adds shapes and attrs
                         (env KERNELD_LOG_LEVEL)
  --log_format=F         text (default) or json lines
  --log_file=PATH        append request logs here instead of stderr
  --trace_file=PATH      capture the workload: one JSON line per request (docs/metrics.md)
  --trace_sample_rate=R  fraction of requests captured, 0..1 (default 1)
  --max_message_mb=N     largest request or response message (default 256); an
                         inline result beyond it is refused up front (RESOURCE_EXHAUSTED)
  --max_inflight_mb=N    request bytes held at once, inline inputs and outputs of all
                         requests in flight (default 4096); beyond: RESOURCE_EXHAUSTED
  --max_graph_steps=N    steps one ExecuteGraph may have (default 256; docs/graphs.md)
  --graph_cache_entries=N  request graphs kept captured as CUDA graphs per GPU stream,
                         least recently used dropped first (default 64; 0: no replay)
  --cpu_workers=N        requests the CPU backend runs at once (default 2)
  --cuda_streams=N       requests one GPU runs at once, each on its own stream and worker
                         thread (default 4); inline runs count too (--inline_max_kb)
  --cpu_threads=N        threads one CPU request may use (default: all cores)
  --queue_capacity=N     queued requests per device before RESOURCE_EXHAUSTED (1024)
  --worker_spin_us=N     an idle device thread polls its queue N us before it sleeps:
                         trades CPU for the wake-up latency of a sleeping thread (0)
  --adaptive_spin_us=N   an idle device thread polls up to N us, but only while tasks
                         arrived within the last 8 x N us: no CPU spent when the daemon
                         is idle (0: off)
  --grpc_api=API         sync (default): every RPC on gRPC's sync API, each call handled
                         on the thread that polled it (an open ExecuteStream holds a
                         thread; its requests run concurrently within --stream_window);
                         callback: every RPC on gRPC's callback API, whose poller threads
                         hand each call on (slower for few clients; measured in
                         docs/performance.md)
  --grpc_sync_pollers=N  with --grpc_api=sync: threads that may wait for new calls at once
                         (gRPC's MAX_POLLERS). 0 (default): on a GPU host as many as the
                         GPUs have streams (at least 2), so threads that ran GPU work are kept; without
                         a GPU, gRPC's default (2)
  --gpu_timing=T         what a GPU request's execute time measures: host (default), the
                         worker's span from the launch call to seeing the work done, or
                         events, the GPU's own time between CUDA timing events around the
                         launch (costs a small request ~4 us and more at the tail)
  --inline_max_kb=N      a request whose tensors total at most N KiB runs on the gRPC
                         thread that received it when its device's queue is empty and
                         a worker slot is free, saving the hand-off (default 64; -1: never)
  --inline_max_us=N      ...and when its op's recent execution time on that device is at
                         most N us: a longer run would hold the receiving thread, and a
                         stream's next read, for its whole length (default 100)
  --stream_window=N      requests in flight plus responses not yet written, per
                         ExecuteStream, before it stops reading (default 64)
  --stream_buffer_mb=N   request + response bytes one ExecuteStream may hold before it
                         stops reading; a client that does not read its responses is
                         then held back by HTTP/2 flow control (default 64)
  --max_streams_per_connection=N  calls (streams) one HTTP/2 connection may have open at
                         once, announced to the client (gRPC clients queue the rest; a peer
                         that ignores it loses the connection) (default 256)
  --max_streams=N        ExecuteStreams open at once, daemon-wide; beyond it a new stream
                         ends at once with RESOURCE_EXHAUSTED (default 4096; 0: no limit)
  --quota_streams=N      per principal: ExecuteStreams open at once; beyond it
                         RESOURCE_EXHAUSTED (default 1024; 0: no limit)
  --drain_timeout_s=S    on SIGTERM, time allowed to finish in-flight work (30)
  --enable_cuda=BOOL     use GPUs when present (default true)
  --ready_file=PATH      write the bound addresses here once serving
  --enable_test_ops=BOOL serve the _test_* ops used by the integration tests (false)
  --allow_client_buffers allow clients without an identity (no token, client certificate
                         or unix-socket uid) to register their CUDA IPC / shared memory even
                         when listening beyond loopback (default: only on loopback/unix)

 identity and isolation (docs/security.md):
  --tls_listen=ADDR      serve TLS on ADDR (repeatable); needs --tls_cert and --tls_key
  --tls_cert=PATH        the server's certificate chain (PEM)
  --tls_key=PATH         the server's private key (PEM)
  --tls_client_ca=PATH   require client certificates signed by this CA (mutual TLS); the
                         principal is then the certificate's subject (or its first SAN)
  --allow_insecure_remote  allow a plaintext --listen beyond loopback / unix sockets
  --auth_tokens=PATH     bearer tokens, one per line: TOKEN PRINCIPAL ROLE [uid=N]
                         [max_bytes=N] [max_buffers=N] [max_inflight=N]; ROLE is user or
                         admin; a call without a token is then UNAUTHENTICATED unless it
                         comes with a client certificate or over a unix socket. SIGHUP
                         re-reads the file.
  --quota_bytes=N        per principal: bytes registered + allocated (K/M/G; 0: no limit;
                         default: a quarter of the host's memory)
  --quota_buffers=N      per principal: buffers held at once (0: no limit; default 1024,
                         a quarter of the shared-memory mappings kerneld keeps)
  --quota_inflight=N     per principal: requests in flight (0: no limit; default
                         --queue_capacity)
  --rate_limit=R         per principal: requests per second, a token bucket with one
                         second's burst; beyond it RESOURCE_EXHAUSTED (0, default: none)
  --anonymous_buffers=M  buffers of plaintext TCP callers without a token: connection
                         (default): each connection is a principal of its own, its buffers
                         private to it and released when it closes; shared: every such
                         caller is the one principal "anonymous" (any local user may list
                         and use the others' buffers)

 user kernels (docs/user-kernels.md):
  --allow_user_kernels[=ROLES]  let clients register CUDA source over AdminService (off
                         by default); bare: admin principals only; =admin,user: users too
  --user_kernel_visibility=V  own (default): a principal sees its own kernels; all: every
                         principal sees every kernel (names are then unique daemon-wide)
  --user_kernel_timeout_ms=N  a user kernel running longer fails DEADLINE_EXCEEDED and its
                         sandbox is replaced (default 1000)
  --user_kernel_compiles_per_minute=N  registrations one principal may compile a minute
                         (default 30; 0: no limit)
  --max_user_kernels=N   kernels one principal may have registered at once (default 64)
  --user_kernel_arch=ARCH  the architecture user kernels compile for on a host without a
                         GPU (default sm_90); with GPUs, each GPU's own

 runtime compilation, the nvrtc backend (docs/jit.md):
  --jit=MODE             async (default): a new specialization runs on AOT while NVRTC
                         compiles it in the background; sync: the request waits for the
                         compile; off: no runtime compilation
  --jit_cache_dir=PATH   compiled kernels on disk (default $XDG_CACHE_HOME/kerneld/jit,
                         else ~/.cache/kerneld/jit); owned by the daemon's user, writable by
                         no one else. Unusable: a log line, and compiles are kept in memory
  --jit_cache_max_mb=N   the cache's size cap; least recently used entries go first
                         (default 1024; 0: no cap)
  --jit_warm=FILE        compile at start the kernels listed, one "op dtype shape [arch]"
                         a line (rmsnorm bfloat16 16x4096), as kernelctl jit warm does
  --jit_precompile_arch=ARCH
                         compile the --jit_warm list for ARCH (sm_90) into --jit_cache_dir
                         and exit: no GPU needed (a container image's warmed cache)
  --jit_precompile_sms=N the SM count the launch plans assume there (H100 SXM: 132;
                         default 0: unknown, the plans' GPU-independent choices)

 scheduling (docs/architecture.md, "Scheduling"):
  --tuning=MODE          how an op's implementation is chosen per shape bucket: frozen
                         (default): by the measurements in --tuning_file, never exploring
                         (a bucket it lacks ranks by static priority); online: a new
                         bucket tries each eligible implementation once to warm it, then
                         --tuning_explore_runs times, then runs the fastest and re-checks
                         now and then; off:
                         static priority only
  --tuning_file=PATH     the tuning table: loaded at start when its stamp (kerneld version,
                         devices, driver, CUDA) matches, else ignored with a log line;
                         written at exit (online) and by kernelctl tune
  --tuning_explore_runs=N  timed runs of each implementation in a new bucket, after its
                         warm-up (3)
  --tuning_recheck_every=N a settled bucket times one other implementation once per N
                         requests (1000; 0: never)
  --tuning_max_buckets=N buckets the table holds; past it new buckets rank statically (4096)
  --priority_aging_ms=N  a queued request gains one priority level per N ms waited, so low
                         priority never starves (10)
)";
}

std::string ParseFlags(int argc, char** argv, Config* cfg, bool* help) {
  *help = false;
  if (const char* env = std::getenv("KERNELD_LOG_LEVEL")) ParseInt(env, &cfg->log_level);
  bool listen_seen = false;
  bool quota_seen[3] = {false, false, false};
  using Setter = std::function<bool(const std::string&)>;
  std::map<std::string, Setter> flags = {
      {"listen",
       [&](const std::string& v) {
         if (v.empty()) return false;
         if (!listen_seen)
           cfg->listen = v;
         else
           cfg->extra_listen.push_back(v);
         listen_seen = true;
         return true;
       }},
      {"lane_socket",
       [&](const std::string& v) {
         cfg->lane_socket = v.rfind("unix:", 0) == 0 ? v.substr(5) : v;
         return !cfg->lane_socket.empty() && cfg->lane_socket.size() < 100;
       }},
      {"lane_slots",
       [&](const std::string& v) {
         return ParseInt(v, &cfg->lane_slots) && cfg->lane_slots >= 1 && cfg->lane_slots <= 256;
       }},
      {"lane_slot_kb",
       [&](const std::string& v) {
         return ParseInt(v, &cfg->lane_slot_kb) && cfg->lane_slot_kb >= 4 &&
                cfg->lane_slot_kb <= 65536;
       }},
      {"lane_spin_us",
       [&](const std::string& v) {
         return ParseInt(v, &cfg->lane_spin_us) && cfg->lane_spin_us >= 0 &&
                cfg->lane_spin_us <= 1000000;
       }},
      {"quota_lanes",
       [&](const std::string& v) {
         return ParseInt(v, &cfg->quota_lanes) && cfg->quota_lanes >= 0 &&
                cfg->quota_lanes <= 65536;
       }},
      {"max_lanes",
       [&](const std::string& v) {
         return ParseInt(v, &cfg->max_lanes) && cfg->max_lanes >= 1 && cfg->max_lanes <= 65536;
       }},
      {"metrics_listen",
       [&](const std::string& v) {
         cfg->metrics_listen = v;
         return true;
       }},
      {"log_level", [&](const std::string& v) { return ParseInt(v, &cfg->log_level); }},
      {"log_format",
       [&](const std::string& v) {
         cfg->log_format = v;
         return v == "text" || v == "json";
       }},
      {"log_file",
       [&](const std::string& v) {
         cfg->log_file = v;
         return !v.empty();
       }},
      {"trace_file",
       [&](const std::string& v) {
         cfg->trace_file = v;
         return !v.empty();
       }},
      {"trace_sample_rate",
       [&](const std::string& v) {
         char* end = nullptr;
         cfg->trace_sample_rate = std::strtod(v.c_str(), &end);
         return !v.empty() && *end == '\0' && cfg->trace_sample_rate >= 0 &&
                cfg->trace_sample_rate <= 1;
       }},
      {"max_message_mb",
       [&](const std::string& v) {
         return ParseInt(v, &cfg->max_message_mb) && cfg->max_message_mb > 0 &&
                cfg->max_message_mb <= 2047;
       }},
      {"max_inflight_mb",
       [&](const std::string& v) {
         return ParseInt(v, &cfg->max_inflight_mb) && cfg->max_inflight_mb > 0 &&
                cfg->max_inflight_mb <= (1 << 24);
       }},
      {"max_graph_steps",
       [&](const std::string& v) {
         return ParseInt(v, &cfg->max_graph_steps) && cfg->max_graph_steps > 0 &&
                cfg->max_graph_steps <= 65536;
       }},
      {"graph_cache_entries",
       [&](const std::string& v) {
         return ParseInt(v, &cfg->graph_cache_entries) && cfg->graph_cache_entries >= 0 &&
                cfg->graph_cache_entries <= 65536;
       }},
      {"cpu_workers",
       [&](const std::string& v) {
         return ParseInt(v, &cfg->cpu_workers) && cfg->cpu_workers > 0;
       }},
      {"cuda_streams",
       [&](const std::string& v) {
         return ParseInt(v, &cfg->cuda_streams) && cfg->cuda_streams > 0 &&
                cfg->cuda_streams <= 256;
       }},
      {"cpu_threads",
       [&](const std::string& v) {
         return ParseInt(v, &cfg->cpu_threads) && cfg->cpu_threads >= 0;
       }},
      {"queue_capacity",
       [&](const std::string& v) {
         return ParseInt(v, &cfg->queue_capacity) && cfg->queue_capacity > 0;
       }},
      {"worker_spin_us",
       [&](const std::string& v) {
         return ParseInt(v, &cfg->worker_spin_us) && cfg->worker_spin_us >= 0 &&
                cfg->worker_spin_us <= 1000000;
       }},
      {"adaptive_spin_us",
       [&](const std::string& v) {
         return ParseInt(v, &cfg->adaptive_spin_us) && cfg->adaptive_spin_us >= 0 &&
                cfg->adaptive_spin_us <= 100000;
       }},
      {"grpc_api",
       [&](const std::string& v) {
         cfg->grpc_api = v;
         return v == "callback" || v == "sync";
       }},
      {"grpc_sync_pollers",
       [&](const std::string& v) {
         return ParseInt(v, &cfg->grpc_sync_pollers) && cfg->grpc_sync_pollers >= 0 &&
                cfg->grpc_sync_pollers <= 1024;
       }},
      {"gpu_timing",
       [&](const std::string& v) {
         cfg->gpu_timing = v;
         return v == "host" || v == "events";
       }},
      {"inline_max_kb",
       [&](const std::string& v) {
         return ParseInt(v, &cfg->inline_max_kb) && cfg->inline_max_kb >= -1 &&
                cfg->inline_max_kb <= (1 << 20);
       }},
      {"inline_max_us",
       [&](const std::string& v) {
         return ParseInt(v, &cfg->inline_max_us) && cfg->inline_max_us >= 0 &&
                cfg->inline_max_us <= 10000000;
       }},
      {"stream_window",
       [&](const std::string& v) {
         return ParseInt(v, &cfg->stream_window) && cfg->stream_window > 0;
       }},
      {"stream_buffer_mb",
       [&](const std::string& v) {
         return ParseInt(v, &cfg->stream_buffer_mb) && cfg->stream_buffer_mb > 0 &&
                cfg->stream_buffer_mb <= 65536;
       }},
      {"max_streams_per_connection",
       [&](const std::string& v) {
         return ParseInt(v, &cfg->max_streams_per_connection) &&
                cfg->max_streams_per_connection > 0;
       }},
      {"max_streams",
       [&](const std::string& v) {
         return absl::SimpleAtoi(v, &cfg->max_streams) && cfg->max_streams >= 0;
       }},
      {"quota_streams",
       [&](const std::string& v) {
         return absl::SimpleAtoi(v, &cfg->quota_streams) && cfg->quota_streams >= 0;
       }},
      {"drain_timeout_s",
       [&](const std::string& v) {
         char* end = nullptr;
         cfg->drain_timeout_s = std::strtod(v.c_str(), &end);
         // Finite and at most 1e6 s: the daemon turns it into milliseconds
         // in an int64 (inf or 1e300 overflowed that conversion, UB).
         return !v.empty() && *end == '\0' && cfg->drain_timeout_s >= 0 &&
                cfg->drain_timeout_s <= 1e6;
       }},
      {"enable_cuda", [&](const std::string& v) { return ParseBool(v, &cfg->enable_cuda); }},
      {"ready_file",
       [&](const std::string& v) {
         cfg->ready_file = v;
         return true;
       }},
      {"enable_test_ops",
       [&](const std::string& v) { return ParseBool(v, &cfg->enable_test_ops); }},
      {"allow_client_buffers",
       [&](const std::string& v) { return ParseBool(v, &cfg->allow_client_buffers); }},
      {"anonymous_buffers",
       [&](const std::string& v) {
         cfg->anonymous_buffers = v;
         return v == "connection" || v == "shared";
       }},
      {"tls_listen",
       [&](const std::string& v) {
         cfg->tls_listen.push_back(v);
         return !v.empty() && v.rfind("unix", 0) != 0;
       }},
      {"tls_cert",
       [&](const std::string& v) {
         cfg->tls_cert = v;
         return !v.empty();
       }},
      {"tls_key",
       [&](const std::string& v) {
         cfg->tls_key = v;
         return !v.empty();
       }},
      {"tls_client_ca",
       [&](const std::string& v) {
         cfg->tls_client_ca = v;
         return !v.empty();
       }},
      {"allow_insecure_remote",
       [&](const std::string& v) { return ParseBool(v, &cfg->allow_insecure_remote); }},
      {"auth_tokens",
       [&](const std::string& v) {
         cfg->auth_tokens = v;
         return !v.empty();
       }},
      {"quota_bytes",
       [&](const std::string& v) {
         quota_seen[0] = true;
         return ParseByteSize(v, &cfg->quota_bytes);
       }},
      {"quota_buffers",
       [&](const std::string& v) {
         quota_seen[1] = true;
         return absl::SimpleAtoi(v, &cfg->quota_buffers) && cfg->quota_buffers >= 0;
       }},
      {"quota_inflight",
       [&](const std::string& v) {
         quota_seen[2] = true;
         return absl::SimpleAtoi(v, &cfg->quota_inflight) && cfg->quota_inflight >= 0;
       }},
      {"rate_limit",
       [&](const std::string& v) {
         char* end = nullptr;
         cfg->rate_limit = std::strtod(v.c_str(), &end);
         return !v.empty() && *end == '\0' && cfg->rate_limit >= 0 && cfg->rate_limit <= 1e9;
       }},
      // User kernels (docs/user-kernels.md).
      {"allow_user_kernels",
       [&](const std::string& v) {
         cfg->allow_user_kernels = v == "true" ? "admin" : v == "false" ? "" : v;
         for (size_t b = 0; b <= v.size() && v != "true" && v != "false";) {
           size_t e = v.find(',', b);
           if (e == std::string::npos) e = v.size();
           const std::string role = v.substr(b, e - b);
           if (role != "admin" && role != "user") return false;
           b = e + 1;
         }
         return true;
       }},
      {"user_kernel_visibility",
       [&](const std::string& v) {
         cfg->user_kernel_visibility = v;
         return v == "own" || v == "all";
       }},
      {"user_kernel_timeout_ms",
       [&](const std::string& v) {
         return ParseInt(v, &cfg->user_kernel_timeout_ms) && cfg->user_kernel_timeout_ms >= 1 &&
                cfg->user_kernel_timeout_ms <= 3600000;
       }},
      {"user_kernel_compiles_per_minute",
       [&](const std::string& v) {
         return ParseInt(v, &cfg->user_kernel_compiles_per_minute) &&
                cfg->user_kernel_compiles_per_minute >= 0;
       }},
      {"max_user_kernels",
       [&](const std::string& v) {
         return ParseInt(v, &cfg->max_user_kernels) && cfg->max_user_kernels >= 1 &&
                cfg->max_user_kernels <= 65536;
       }},
      {"user_kernel_arch",
       [&](const std::string& v) {
         cfg->user_kernel_arch = v;
         return v.size() > 3 && v.compare(0, 3, "sm_") == 0;
       }},
      // The nvrtc backend's JIT.
      {"jit",
       [&](const std::string& v) {
         cfg->jit = v;
         return v == "async" || v == "sync" || v == "off";
       }},
      {"jit_cache_dir",
       [&](const std::string& v) {
         cfg->jit_cache_dir = v;
         return !v.empty();
       }},
      {"jit_cache_max_mb",
       [&](const std::string& v) {
         return ParseInt(v, &cfg->jit_cache_max_mb) && cfg->jit_cache_max_mb >= 0 &&
                cfg->jit_cache_max_mb <= (1 << 24);
       }},
      {"jit_warm",
       [&](const std::string& v) {
         cfg->jit_warm = v;
         return !v.empty();
       }},
      {"jit_precompile_arch",
       [&](const std::string& v) {
         cfg->jit_precompile_arch = v;
         return v.size() > 3 && v.compare(0, 3, "sm_") == 0;
       }},
      {"tuning",
       [&](const std::string& v) {
         cfg->tuning = v;
         return v == "online" || v == "frozen" || v == "off";
       }},
      {"tuning_file",
       [&](const std::string& v) {
         cfg->tuning_file = v;
         return !v.empty();
       }},
      {"tuning_explore_runs",
       [&](const std::string& v) {
         return ParseInt(v, &cfg->tuning_explore_runs) && cfg->tuning_explore_runs >= 1 &&
                cfg->tuning_explore_runs <= 1000;
       }},
      {"tuning_recheck_every",
       [&](const std::string& v) {
         return ParseInt(v, &cfg->tuning_recheck_every) && cfg->tuning_recheck_every >= 0;
       }},
      {"tuning_max_buckets",
       [&](const std::string& v) {
         return ParseInt(v, &cfg->tuning_max_buckets) && cfg->tuning_max_buckets >= 0 &&
                cfg->tuning_max_buckets <= (1 << 24);
       }},
      {"priority_aging_ms",
       [&](const std::string& v) {
         return ParseInt(v, &cfg->priority_aging_ms) && cfg->priority_aging_ms >= 1 &&
                cfg->priority_aging_ms <= 3600000;
       }},
      {"jit_precompile_sms",
       [&](const std::string& v) {
         return ParseInt(v, &cfg->jit_precompile_sms) && cfg->jit_precompile_sms >= 0 &&
                cfg->jit_precompile_sms <= 4096;
       }},
  };
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    if (arg == "--help" || arg == "-h") {
      *help = true;
      return "";
    }
    if (arg.rfind("--", 0) != 0)
      return "unexpected argument " + Quote(arg) + " (flags look like --name=value)";
    std::string name = arg.substr(2), value;
    auto eq = name.find('=');
    if (eq != std::string::npos) {
      value = name.substr(eq + 1);
      name = name.substr(0, eq);
    } else if (name == "enable_cuda" || name == "enable_test_ops" ||
               name == "allow_client_buffers" || name == "allow_insecure_remote" ||
               name == "allow_user_kernels") {
      value = "true";  // a bare boolean flag (--allow_user_kernels: admin)
    } else if (i + 1 < argc) {
      value = argv[++i];
    } else {
      return "flag --" + Sanitize(name) + " needs a value";
    }
    auto it = flags.find(name);
    if (it == flags.end()) return "unknown flag --" + Sanitize(name) + " (see --help)";
    if (!it->second(value)) return "bad value " + Quote(value) + " for --" + name + " (see --help)";
  }
  const HostQuotaDefaults q = DefaultQuotas(*cfg);
  if (!quota_seen[0]) cfg->quota_bytes = q.bytes;
  if (!quota_seen[1]) cfg->quota_buffers = q.buffers;
  if (!quota_seen[2]) cfg->quota_inflight = q.inflight;
  // TLS flags only make sense together: say which one is missing.
  if (!cfg->tls_listen.empty() && (cfg->tls_cert.empty() || cfg->tls_key.empty()))
    return "--tls_listen needs --tls_cert and --tls_key (PEM files; docs/security.md shows how to "
           "make them)";
  if (cfg->tls_listen.empty() &&
      (!cfg->tls_cert.empty() || !cfg->tls_key.empty() || !cfg->tls_client_ca.empty()))
    return "--tls_cert, --tls_key and --tls_client_ca only apply to --tls_listen addresses; add "
           "--tls_listen=HOST:PORT";
  if (cfg->grpc_sync_pollers > 0 && cfg->grpc_api != "sync")
    return "--grpc_sync_pollers bounds gRPC's sync API only; use --grpc_api=sync (the default) or "
           "drop it";
  if (!cfg->allow_insecure_remote) {
    std::vector<std::string> addrs = {cfg->listen};
    addrs.insert(addrs.end(), cfg->extra_listen.begin(), cfg->extra_listen.end());
    for (const auto& a : addrs)
      if (!IsLocalAddress(a))
        return "--listen=" + Sanitize(a) +
               " would serve plaintext beyond this machine (not loopback or a unix socket): serve "
               "it with "
               "--tls_listen (and --tls_cert, --tls_key), or pass --allow_insecure_remote to "
               "accept that risk";
  }
  return "";
}

}  // namespace kerneld::server
