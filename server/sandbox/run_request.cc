#include "sandbox/run_request.h"

namespace kerneld::server::sandbox {

std::string RunRequest::Encode() const {
  Writer w;
  w.PutString(key).PutString(cubin).PutString(symbol);
  for (int i = 0; i < 3; ++i) w.Put(grid[i]);
  for (int i = 0; i < 3; ++i) w.Put(block[i]);
  w.Put(shared_bytes).PutString(ipc_handle).Put(arena_bytes);
  w.Put(static_cast<uint32_t>(args.size()));
  for (const RunArg& a : args)
    w.Put(static_cast<uint32_t>(a.kind)).Put(a.offset).Put(a.i).Put(a.f).Put(a.b);
  return std::move(w.bytes());
}

bool RunRequest::Decode(std::string_view payload) {
  Reader r(payload);
  r.GetString(&key, 128);
  r.GetString(&cubin, kMaxRequestBytes);
  r.GetString(&symbol, 4096);
  for (int i = 0; i < 3; ++i) r.Get(&grid[i]);
  for (int i = 0; i < 3; ++i) r.Get(&block[i]);
  r.Get(&shared_bytes);
  r.GetString(&ipc_handle, 64);
  r.Get(&arena_bytes);
  uint32_t n = 0;
  if (!r.Get(&n) || n > 64) return false;
  args.resize(n);
  for (RunArg& a : args) {
    uint32_t kind = 0;
    r.Get(&kind);
    a.kind = static_cast<RunArg::Kind>(kind);
    r.Get(&a.offset);
    r.Get(&a.i);
    r.Get(&a.f);
    r.Get(&a.b);
    if (kind > RunArg::kBool) return false;
  }
  return r.done() && (ipc_handle.empty() || ipc_handle.size() == 64);
}

}  // namespace kerneld::server::sandbox
