#include "jit/jit_key.h"

#include "jit/sha256.h"

namespace kerneld::server::jit {

std::string MakeKey(const KeyParts& p) {
  Sha256 h;
  // The layout's version: a change to what goes in below gives new keys.
  h.Field("kerneld-jit-key-v1");
  h.Field("program");
  h.Field(p.program);
  h.Field("headers");
  h.Field(std::to_string(p.headers.size()));
  for (const auto& [name, text] : p.headers) {  // std::map: sorted by name
    h.Field(name);
    h.Field(text);
  }
  auto list = [&h](const char* tag, const std::vector<std::string>& v) {
    h.Field(tag);
    h.Field(std::to_string(v.size()));
    for (const std::string& s : v) h.Field(s);
  };
  list("toolkit_headers", p.toolkit_headers);
  list("name_expressions", p.name_expressions);
  list("options", p.options);
  h.Field("arch");
  h.Field(p.arch);
  h.Field("nvrtc");
  h.Field(p.nvrtc_version);
  h.Field("toolkit");
  h.Field(p.toolkit_version);
  return Sha256::Hex(h.Final());
}

}  // namespace kerneld::server::jit
