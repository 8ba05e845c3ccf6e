#include "sandbox/protocol.h"

#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>

namespace kerneld::server::sandbox {

namespace {

bool WriteAll(int fd, const char* p, size_t n) {
  while (n > 0) {
    const ssize_t w = send(fd, p, n, MSG_NOSIGNAL);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) return false;
    p += w;
    n -= static_cast<size_t>(w);
  }
  return true;
}

bool ReadAll(int fd, char* p, size_t n) {
  while (n > 0) {
    const ssize_t r = read(fd, p, n);
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) return false;
    p += r;
    n -= static_cast<size_t>(r);
  }
  return true;
}

}  // namespace

bool WriteFrame(int fd, Frame kind, std::string_view payload) {
  FrameHeader h;
  h.kind = static_cast<uint32_t>(kind);
  h.size = static_cast<uint32_t>(payload.size());
  return WriteAll(fd, reinterpret_cast<const char*>(&h), sizeof h) &&
         WriteAll(fd, payload.data(), payload.size());
}

bool ReadFrame(int fd, uint32_t max_bytes, Frame* kind, std::string* payload) {
  FrameHeader h;
  if (!ReadAll(fd, reinterpret_cast<char*>(&h), sizeof h)) return false;
  if (h.magic != kFrameMagic || h.size > max_bytes) return false;
  payload->resize(h.size);
  if (!ReadAll(fd, payload->data(), h.size)) return false;
  *kind = static_cast<Frame>(h.kind);
  return true;
}

std::string EncodeReply(const Status& st) {
  Writer w;
  w.Put(static_cast<int32_t>(st.code()));
  w.PutString(st.message().substr(0, kMaxReplyBytes - 64));
  return std::move(w.bytes());
}

Status DecodeReply(std::string_view payload) {
  Reader r(payload);
  int32_t code = 0;
  std::string msg;
  if (!r.Get(&code) || !r.GetString(&msg, kMaxReplyBytes) || !r.done() || code < 0 || code > 16)
    return Internal("the sandbox worker sent a malformed reply");
  return {static_cast<StatusCode>(code), Sanitize(msg, 1024)};
}

}  // namespace kerneld::server::sandbox
