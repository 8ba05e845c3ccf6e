// The registry's references, and comparing results with them.
#include "kerneld/reference.h"

#include <algorithm>
#include <cmath>

namespace kerneld {

bool Reference(const std::string& op, const HostTensors& in, const AttrMap& attrs, HostTensors* out,
               std::string* error) {
  const OpDef* def = OpRegistry::Global().Find(op);
  if (def == nullptr || !def->reference) {
    *error = "no host reference for op '" + op + "'";
    return false;
  }
  return def->reference(in, attrs, out, error);
}

double AttrOr(const AttrMap& a, const std::string& n, double def) {
  auto it = a.find(n);
  if (it == a.end()) return def;
  if (auto* d = std::get_if<double>(&it->second)) return *d;
  if (auto* i = std::get_if<int64_t>(&it->second)) return static_cast<double>(*i);
  return def;
}

bool AttrOr(const AttrMap& a, const std::string& n, bool def) {
  auto it = a.find(n);
  if (it == a.end()) return def;
  if (auto* b = std::get_if<bool>(&it->second)) return *b;
  return def;
}

const HostTensor* RefInput(const HostTensors& in, const char* name, const std::string& op,
                           std::string* error) {
  auto it = in.find(name);
  if (it == in.end()) *error = op + " needs input " + name;
  return it == in.end() ? nullptr : &it->second;
}

bool RefRows(const HostTensor& x, const std::string& op, int64_t* rows, int64_t* h,
             std::string* error) {
  if (x.shape.empty()) return *error = op + ": x must have a last dim", false;
  *h = x.shape.back();
  *rows = *h == 0 ? 0 : static_cast<int64_t>(x.values.size()) / *h;
  return true;
}

Comparison Compare(const std::vector<double>& got, const std::vector<double>& ref, double rtol,
                   double atol) {
  Comparison c;
  if (got.size() != ref.size()) {
    c.mismatches = static_cast<int64_t>(std::max(got.size(), ref.size()));
    c.first_bad = 0;
    return c;
  }
  for (size_t i = 0; i < got.size(); ++i) {
    double e = std::fabs(got[i] - ref[i]);
    bool bad = !(e <= atol + rtol * std::fabs(ref[i]));  // NaN never passes
    if (std::isnan(got[i]) && std::isnan(ref[i])) bad = false, e = 0;
    if (std::isinf(ref[i]) && got[i] == ref[i]) bad = false, e = 0;
    c.max_abs_err = std::max(c.max_abs_err, std::isnan(e) ? INFINITY : e);
    if (ref[i] != 0) c.max_rel_err = std::max(c.max_rel_err, e / std::fabs(ref[i]));
    if (bad) {
      if (c.first_bad < 0) c.first_bad = static_cast<int64_t>(i);
      ++c.mismatches;
    }
  }
  return c;
}

void Tolerance(DType dt, double* rtol, double* atol) {
  switch (dt) {
    case DType::kFloat16:
      *rtol = *atol = 1e-3;
      break;
    case DType::kBFloat16:
      *rtol = *atol = 1e-2;
      break;
    default:
      *rtol = *atol = 1e-5;
      break;
  }
}

}  // namespace kerneld
