// The registry, and the registrars that fill it at first use.
#include "kerneld/registry.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <set>

namespace kerneld {

namespace {

// What the registrars recorded at static initialization, keyed by op id.
struct Pending {
  std::map<std::string, OpDefineFn> ops;
  std::multimap<std::string, std::pair<std::string, ImplDefineFn>> impls;  // id -> (file, fn)
  std::set<std::string> backends;                                          // KERNELD_BACKEND
};
Pending& PendingRegistrations() {
  static Pending* p = new Pending();  // never destroyed: registrars may outlive main
  return *p;
}

[[noreturn]] void RegistrationFailed(const std::string& what) {
  std::fprintf(stderr, "kerneld: %s\n", what.c_str());
  std::abort();
}

}  // namespace

OpRegistrar::OpRegistrar(const char* id, OpDefineFn fn) {
  if (!PendingRegistrations().ops.emplace(id, fn).second)
    RegistrationFailed(std::string("KERNELD_OP(") + id + ") defined twice");
}

ImplRegistrar::ImplRegistrar(const char* op_id, const char* file, ImplDefineFn fn) {
  PendingRegistrations().impls.emplace(op_id, std::make_pair(std::string(file), fn));
}

BackendRegistrar::BackendRegistrar(const char* name) {
  PendingRegistrations().backends.insert(name);
}

std::vector<std::string> OpRegistry::KnownBackends() const {
  std::set<std::string> s(PendingRegistrations().backends);
  for (const auto& b : Backends()) s.insert(b);
  return {s.begin(), s.end()};
}

OpRegistry& OpRegistry::Global() {
  static OpRegistry* reg = [] {
    auto* r = new OpRegistry();
    const Pending& p = PendingRegistrations();
    for (const auto& [id, impl] : p.impls)
      if (!p.ops.count(id))
        RegistrationFailed(impl.first + ": KERNELD_IMPL(" + id + ", ...) names no KERNELD_OP");
    for (const auto& [id, define] : p.ops) {
      OpDef op = define();
      auto [b, e] = p.impls.equal_range(id);
      for (auto it = b; it != e; ++it) it->second.second(op);
      // One order whatever the link order: by backend name (cpu first).
      std::stable_sort(op.impls.begin(), op.impls.end(),
                       [](const ImplDef& x, const ImplDef& y) { return x.backend < y.backend; });
      if (Status st = r->Register(std::move(op)); !st.ok())
        RegistrationFailed("registering " + id + ": " + st.ToString());
    }
    return r;
  }();
  return *reg;
}

Status OpRegistry::Register(OpDef op) {
  if (op.name.empty()) return InvalidArgument("op without a name");
  if (ops_.count(op.name))
    return {StatusCode::kAlreadyExists, "op '" + op.name + "' registered twice"};
  std::set<std::string> seen;
  for (const auto& i : op.impls)
    if (!seen.insert(i.backend).second)
      return {StatusCode::kAlreadyExists, op.name + ": two '" + i.backend + "' implementations"};
  for (const auto& o : op.outputs) {
    if (!o.in_place_of.empty() && op.InputIndex(o.in_place_of) < 0)
      return InvalidArgument(op.name + ": output '" + o.name + "' in place of unknown input");
    if (!o.may_alias.empty() && op.InputIndex(o.may_alias) < 0)
      return InvalidArgument(op.name + ": output '" + o.name + "' aliases unknown input");
  }
  std::string name = op.name;
  ops_.emplace(name, std::make_unique<OpDef>(std::move(op)));
  return Status::Ok();
}

const OpDef* OpRegistry::Find(std::string_view name) const {
  auto it = ops_.find(name);
  return it == ops_.end() ? nullptr : it->second.get();
}

std::vector<const OpDef*> OpRegistry::List() const {
  std::vector<const OpDef*> out;
  for (const auto& [_, op] : ops_) out.push_back(op.get());
  return out;
}

std::vector<std::string> OpRegistry::Backends() const {
  std::set<std::string> s;
  for (const auto& [_, op] : ops_)
    for (const auto& i : op->impls)
      if (i.backend.rfind('_', 0) != 0) s.insert(i.backend);  // "_x": a test op's double
  return {s.begin(), s.end()};
}

}  // namespace kerneld
