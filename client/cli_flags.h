// kernelctl's argument parsing, shared by its subcommands: each helper
// removes what it consumed from `args`, so what is left over is an error the
// caller can name.
#pragma once

#include <algorithm>
#include <string>
#include <vector>

namespace kerneld::client {

// Removes "--name V" or "--name=V" from args; `def` when absent.
inline std::string TakeFlag(std::vector<std::string>& args, const std::string& name,
                            const std::string& def) {
  for (size_t i = 0; i < args.size(); ++i) {
    if (args[i] == name && i + 1 < args.size()) {
      std::string v = args[i + 1];
      args.erase(args.begin() + static_cast<long>(i), args.begin() + static_cast<long>(i) + 2);
      return v;
    }
    if (args[i].rfind(name + "=", 0) == 0) {
      std::string v = args[i].substr(name.size() + 1);
      args.erase(args.begin() + static_cast<long>(i));
      return v;
    }
  }
  return def;
}

// Every value of a repeatable flag, in order.
inline std::vector<std::string> TakeFlags(std::vector<std::string>& args, const std::string& name) {
  std::vector<std::string> out;
  for (std::string v; !(v = TakeFlag(args, name, "\x01")).empty() && v != "\x01";) out.push_back(v);
  return out;
}

// Removes the switch `name`; true when it was there.
inline bool TakeBool(std::vector<std::string>& args, const std::string& name) {
  auto it = std::find(args.begin(), args.end(), name);
  if (it == args.end()) return false;
  args.erase(it);
  return true;
}

}  // namespace kerneld::client
