#include "reference.h"

#include <algorithm>
#include <cmath>

#include "kerneld/half.h"

namespace kerneld::client {

namespace {
double AttrF(const AttrMap& a, const std::string& n, double def) {
  auto it = a.find(n);
  if (it == a.end()) return def;
  if (auto* d = std::get_if<double>(&it->second)) return *d;
  if (auto* i = std::get_if<int64_t>(&it->second)) return static_cast<double>(*i);
  return def;
}
}  // namespace

// rope, softmax and gemm references (top_k_top_p_sampling is random: its
// tests check support and distribution instead).
namespace {
bool AttrB(const AttrMap& a, const std::string& n, bool def) {
  auto it = a.find(n);
  if (it == a.end()) return def;
  if (auto* b = std::get_if<bool>(&it->second)) return *b;
  return def;
}
const HostTensor* In(const HostTensors& in, const char* name, const std::string& op, std::string* error) {
  auto it = in.find(name);
  if (it == in.end()) *error = op + " needs input " + name;
  return it == in.end() ? nullptr : &it->second;
}

bool RopeReference(const HostTensors& in, const AttrMap& attrs, HostTensors* out, std::string* error) {
  const HostTensor* q = In(in, "q", "rope", error);
  const HostTensor* k = In(in, "k", "rope", error);
  const HostTensor* pos = In(in, "positions", "rope", error);
  const HostTensor* cache = In(in, "cos_sin_cache", "rope", error);
  if (!q || !k || !pos || !cache) return false;
  if (q->shape.size() != 3 || k->shape.size() != 3 || cache->shape.size() != 2)
    return *error = "rope: bad ranks", false;
  const bool neox = AttrB(attrs, "is_neox", true);
  const int64_t rot = cache->shape[1], half = rot / 2, max_pos = cache->shape[0];
  auto rotate = [&](const HostTensor& x, HostTensor* y) -> bool {
    *y = x;
    const int64_t tokens = x.shape[0], heads = x.shape[1], dim = x.shape[2];
    for (int64_t t = 0; t < tokens; ++t) {
      const auto p = static_cast<int64_t>(pos->values[static_cast<size_t>(t)]);
      if (p < 0 || p >= max_pos) return *error = "rope: position out of range", false;
      const double* cs = cache->values.data() + p * rot;
      for (int64_t h = 0; h < heads; ++h) {
        double* v = y->values.data() + (t * heads + h) * dim;
        for (int64_t i = 0; i < half; ++i) {
          double& a = neox ? v[i] : v[2 * i];
          double& b = neox ? v[i + half] : v[2 * i + 1];
          const double x1 = a, x2 = b;
          a = x1 * cs[i] - x2 * cs[half + i];
          b = x2 * cs[i] + x1 * cs[half + i];
        }
      }
    }
    return true;
  };
  return rotate(*q, &(*out)["q"]) && rotate(*k, &(*out)["k"]);
}

bool SoftmaxReference(const HostTensors& in, const AttrMap& attrs, HostTensors* out, std::string* error) {
  const HostTensor* x = In(in, "logits", "softmax", error);
  if (!x) return false;
  if (x->shape.size() != 2) return *error = "softmax: logits must be [batch, vocab]", false;
  // The kernels multiply by 1/temperature as a float.
  const double scale = static_cast<float>(1.0 / AttrF(attrs, "temperature", 1.0));
  HostTensor y = *x;
  y.dtype = DType::kFloat32;
  const int64_t rows = x->shape[0], v = x->shape[1];
  for (int64_t r = 0; r < rows; ++r) {
    double* row = y.values.data() + r * v;
    double m = -INFINITY, sum = 0;
    for (int64_t i = 0; i < v; ++i) m = std::max(m, row[i]);
    for (int64_t i = 0; i < v; ++i) sum += row[i] = std::exp((row[i] - m) * scale);
    for (int64_t i = 0; i < v; ++i) row[i] /= sum;
  }
  (*out)["probs"] = std::move(y);
  return true;
}

bool GemmReference(const HostTensors& in, const AttrMap& attrs, HostTensors* out, std::string* error) {
  const HostTensor* a = In(in, "a", "gemm", error);
  const HostTensor* b = In(in, "b", "gemm", error);
  if (!a || !b) return false;
  if (a->shape.size() != 2 || b->shape.size() != 2) return *error = "gemm: a and b must be matrices", false;
  const bool tb = AttrB(attrs, "transpose_b", false);
  const double alpha = static_cast<float>(AttrF(attrs, "alpha", 1.0));
  const int64_t m = a->shape[0], k = a->shape[1], n = tb ? b->shape[0] : b->shape[1];
  if ((tb ? b->shape[1] : b->shape[0]) != k) return *error = "gemm: inner dims differ", false;
  HostTensor c;
  c.dtype = a->dtype;
  c.shape = {m, n};
  c.values.assign(static_cast<size_t>(m * n), 0.0);
  for (int64_t i = 0; i < m; ++i) {
    for (int64_t kk = 0; kk < k; ++kk) {
      const double av = a->values[static_cast<size_t>(i * k + kk)];
      double* crow = c.values.data() + i * n;
      for (int64_t j = 0; j < n; ++j)
        crow[j] += av * b->values[static_cast<size_t>(tb ? j * k + kk : kk * n + j)];
    }
  }
  for (auto& v : c.values) v *= alpha;
  (*out)["c"] = std::move(c);
  return true;
}
}  // namespace

// add, rmsnorm, fused_add_rmsnorm, layernorm and the gated activations, in
// float64. Where a kernel rounds an intermediate to the dtype
// (fused_add_rmsnorm's residual), the reference rounds it the same way.
namespace {
namespace rowref {

const HostTensor* Get(const HostTensors& in, const char* name, const std::string& op,
                      std::string* error) {
  auto it = in.find(name);
  if (it == in.end()) *error = op + " needs input " + name;
  return it == in.end() ? nullptr : &it->second;
}

// v rounded to dt the way a kernel rounds its float32 result.
double RoundTo(DType dt, double v) {
  const float f = static_cast<float>(v);
  switch (dt) {
    case DType::kFloat16: return HalfToFloat(FloatToHalf(f));
    case DType::kBFloat16: return BFloat16ToFloat(FloatToBFloat16(f));
    case DType::kFloat32: return f;
    default: return v;
  }
}

// Rows of the last dim; false for a scalar.
bool Rows(const HostTensor& x, const std::string& op, int64_t* rows, int64_t* h,
          std::string* error) {
  if (x.shape.empty()) return *error = op + ": x must have a last dim", false;
  *h = x.shape.back();
  *rows = *h == 0 ? 0 : static_cast<int64_t>(x.values.size()) / *h;
  return true;
}

bool Add(const HostTensors& in, HostTensors* out, std::string* error) {
  const HostTensor* a = Get(in, "a", "add", error);
  const HostTensor* b = Get(in, "b", "add", error);
  if (!a || !b) return false;
  if (a->values.size() != b->values.size()) return *error = "add: a and b differ in size", false;
  HostTensor y = *a;
  for (size_t i = 0; i < y.values.size(); ++i) y.values[i] += b->values[i];
  (*out)["y"] = std::move(y);
  return true;
}

// rmsnorm, and fused_add_rmsnorm when `fused`: s = x + residual, residual =
// round(s), x = rmsnorm(s) from the unrounded s (FlashInfer's order).
bool RmsNorm(const std::string& op, bool fused, const HostTensors& in, const AttrMap& attrs,
             HostTensors* out, std::string* error) {
  const HostTensor* x = Get(in, "x", op, error);
  const HostTensor* w = Get(in, "weight", op, error);
  const HostTensor* r = fused ? Get(in, "residual", op, error) : nullptr;
  if (!x || !w || (fused && !r)) return false;
  int64_t rows = 0, h = 0;
  if (!Rows(*x, op, &rows, &h, error)) return false;
  // The kernels see eps and weight_bias as floats.
  const double eps = static_cast<float>(AttrF(attrs, "eps", 1e-6));
  const double bias = static_cast<float>(AttrF(attrs, "weight_bias", 0.0));
  HostTensor y = *x;
  HostTensor res = fused ? *r : HostTensor{};
  std::vector<double> s(static_cast<size_t>(h));
  for (int64_t row = 0; row < rows; ++row) {
    const size_t o = static_cast<size_t>(row * h);
    double ss = 0;
    for (size_t i = 0; i < s.size(); ++i) {
      s[i] = x->values[o + i] + (fused ? r->values[o + i] : 0.0);
      if (fused) res.values[o + i] = RoundTo(res.dtype, s[i]);
      ss += s[i] * s[i];
    }
    const double scale = 1.0 / std::sqrt(ss / static_cast<double>(h) + eps);
    for (size_t i = 0; i < s.size(); ++i) y.values[o + i] = s[i] * scale * (w->values[i] + bias);
  }
  if (fused) {
    (*out)["x"] = std::move(y);
    (*out)["residual"] = std::move(res);
  } else {
    (*out)["y"] = std::move(y);
  }
  return true;
}

bool LayerNorm(const HostTensors& in, const AttrMap& attrs, HostTensors* out,
               std::string* error) {
  const HostTensor* x = Get(in, "x", "layernorm", error);
  const HostTensor* g = Get(in, "gamma", "layernorm", error);
  const HostTensor* b = Get(in, "beta", "layernorm", error);
  if (!x || !g || !b) return false;
  int64_t rows = 0, h = 0;
  if (!Rows(*x, "layernorm", &rows, &h, error)) return false;
  const double eps = static_cast<float>(AttrF(attrs, "eps", 1e-5));
  HostTensor y = *x;
  for (int64_t row = 0; row < rows; ++row) {
    double* v = y.values.data() + row * h;
    double mean = 0, var = 0;
    for (int64_t i = 0; i < h; ++i) mean += v[i];
    mean /= static_cast<double>(h);
    for (int64_t i = 0; i < h; ++i) var += (v[i] - mean) * (v[i] - mean);
    const double rstd = 1.0 / std::sqrt(var / static_cast<double>(h) + eps);
    for (int64_t i = 0; i < h; ++i) {
      const auto k = static_cast<size_t>(i);
      v[i] = (v[i] - mean) * rstd * g->values[k] + b->values[k];
    }
  }
  (*out)["y"] = std::move(y);
  return true;
}

// y[..., d] = act(x[..., :d]) * x[..., d:].
template <typename Act>
bool ActAndMul(const std::string& op, const HostTensors& in, HostTensors* out, std::string* error,
               Act act) {
  const HostTensor* x = Get(in, "x", op, error);
  if (!x) return false;
  int64_t rows = 0, h = 0;
  if (!Rows(*x, op, &rows, &h, error)) return false;
  if (h % 2 != 0) return *error = op + ": x's last dim must be even", false;
  const int64_t d = h / 2;
  HostTensor y;
  y.dtype = x->dtype;
  y.shape = x->shape;
  y.shape.back() = d;
  y.values.resize(static_cast<size_t>(rows * d));
  for (int64_t row = 0; row < rows; ++row) {
    const double* xr = x->values.data() + row * h;
    double* yr = y.values.data() + row * d;
    for (int64_t i = 0; i < d; ++i) yr[i] = act(xr[i]) * xr[d + i];
  }
  (*out)["y"] = std::move(y);
  return true;
}

double Silu(double a) { return a / (1.0 + std::exp(-a)); }
double Gelu(double a) { return 0.5 * a * (1.0 + std::erf(a / std::sqrt(2.0))); }
double GeluTanh(double a) {
  const double k = std::sqrt(2.0 / 3.14159265358979323846);  // sqrt(2 / pi)
  return 0.5 * a * (1.0 + std::tanh(k * (a + 0.044715 * a * a * a)));
}

}  // namespace rowref
}  // namespace

bool Reference(const std::string& op, const HostTensors& in, const AttrMap& attrs,
               HostTensors* out, std::string* error) {
  if (op == "scale") {
    auto it = in.find("x");
    if (it == in.end()) return *error = "scale needs input x", false;
    // The kernel multiplies in float32: the factor it sees is a float.
    double f = static_cast<float>(AttrF(attrs, "factor", 1.0));
    HostTensor y = it->second;
    for (auto& v : y.values) v *= f;
    (*out)["y"] = std::move(y);
    return true;
  }
  if (op == "rope") return RopeReference(in, attrs, out, error);
  if (op == "softmax") return SoftmaxReference(in, attrs, out, error);
  if (op == "gemm") return GemmReference(in, attrs, out, error);
  if (op == "add") return rowref::Add(in, out, error);
  if (op == "rmsnorm") return rowref::RmsNorm(op, false, in, attrs, out, error);
  if (op == "fused_add_rmsnorm") return rowref::RmsNorm(op, true, in, attrs, out, error);
  if (op == "layernorm") return rowref::LayerNorm(in, attrs, out, error);
  if (op == "silu_and_mul") return rowref::ActAndMul(op, in, out, error, rowref::Silu);
  if (op == "gelu_and_mul") return rowref::ActAndMul(op, in, out, error, rowref::Gelu);
  if (op == "gelu_tanh_and_mul") return rowref::ActAndMul(op, in, out, error, rowref::GeluTanh);
  *error = "no host reference for op '" + op + "'";
  return false;
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
    case DType::kFloat16: *rtol = *atol = 1e-3; break;
    case DType::kBFloat16: *rtol = *atol = 1e-2; break;
    default: *rtol = *atol = 1e-5; break;
  }
}

}  // namespace kerneld::client
