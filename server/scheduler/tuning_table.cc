#include "scheduler/tuning_table.h"

#include <algorithm>
#include <tuple>

namespace kerneld::server {

bool ParseTuningMode(const std::string& s, TuningMode* out) {
  if (s == "off")
    *out = TuningMode::kOff;
  else if (s == "frozen")
    *out = TuningMode::kFrozen;
  else if (s == "online")
    *out = TuningMode::kOnline;
  else
    return false;
  return true;
}

const char* TuningModeName(TuningMode m) {
  switch (m) {
    case TuningMode::kOff:
      return "off";
    case TuningMode::kFrozen:
      return "frozen";
    case TuningMode::kOnline:
      return "online";
  }
  return "?";
}

const char* DecisionKindName(DecisionKind k) {
  switch (k) {
    case DecisionKind::kStatic:
      return "static";
    case DecisionKind::kExplore:
      return "explore";
    case DecisionKind::kRecheck:
      return "recheck";
    case DecisionKind::kTuned:
      return "tuned";
  }
  return "?";
}

int64_t ImplStats::Median() const {
  if (nsamples == 0) return 0;
  std::array<int64_t, kSamples> s = samples;
  auto mid = s.begin() + nsamples / 2;
  std::nth_element(s.begin(), mid, s.begin() + nsamples);
  return *mid;
}

ImplStats* BucketEntry::Find(const ImplDef* impl) {
  for (auto& s : impls)
    if (s.impl == impl) return &s;
  return nullptr;
}

namespace {
ImplStats& FindOrAdd(BucketEntry& e, const ImplDef* impl) {
  if (ImplStats* s = e.Find(impl)) return *s;
  e.impls.push_back(ImplStats{});
  e.impls.back().impl = impl;
  return e.impls.back();
}
void AddSample(ImplStats& s, int64_t ns) {
  s.samples[static_cast<size_t>(s.next)] = ns;
  s.next = (s.next + 1) % ImplStats::kSamples;
  s.nsamples = std::min(s.nsamples + 1, ImplStats::kSamples);
}
}  // namespace

int TuningTable::ModelId(const std::string& model) {
  std::unique_lock lock(mu_);
  for (size_t i = 0; i < models_.size(); ++i)
    if (models_[i] == model) return static_cast<int>(i);
  models_.push_back(model);
  return static_cast<int>(models_.size() - 1);
}

std::string TuningTable::ModelName(int id) const {
  std::shared_lock lock(mu_);
  return id >= 0 && static_cast<size_t>(id) < models_.size() ? models_[static_cast<size_t>(id)]
                                                             : std::string("?");
}

BucketEntry* TuningTable::FindBucket(const TuningKey& key) const {
  std::shared_lock lock(mu_);
  auto it = buckets_.find(key);
  return it == buckets_.end() ? nullptr : const_cast<BucketEntry*>(&it->second);
}

BucketEntry* TuningTable::Bucket(const TuningKey& key) {
  if (BucketEntry* e = FindBucket(key)) return e;
  std::unique_lock lock(mu_);
  if (static_cast<int64_t>(buckets_.size()) >= opt_.max_buckets) {
    auto it = buckets_.find(key);
    return it == buckets_.end() ? nullptr : &it->second;
  }
  return &buckets_[key];  // node_hash_map: the entry never moves
}

Decision TuningTable::DecideLocked(BucketEntry& e, absl::Span<const ImplDef* const> c) const {
  Decision d;
  if (c.empty() || opt_.mode == TuningMode::kOff) return d;
  if (opt_.mode == TuningMode::kOnline) {
    for (size_t i = 0; i < c.size(); ++i) {
      const ImplStats* s = e.Find(c[i]);
      if (s == nullptr || (!s->abandoned && s->issued < opt_.warmup_runs + opt_.explore_runs))
        return {static_cast<int>(i), DecisionKind::kExplore, s ? s->ewma_ns : 0};
    }
  }
  int best = -1;
  int64_t best_ns = 0;
  for (size_t i = 0; i < c.size(); ++i) {
    const ImplStats* s = e.Find(c[i]);
    if (s == nullptr || s->nsamples == 0) continue;
    const int64_t m = s->Median();
    if (best < 0 || m < best_ns) best = static_cast<int>(i), best_ns = m;
  }
  if (best < 0) {
    const ImplStats* s = e.Find(c[0]);
    return {0, DecisionKind::kStatic, s ? s->ewma_ns : 0};
  }
  if (opt_.mode == TuningMode::kOnline && c.size() > 1 && opt_.recheck_every > 0 &&
      (e.decisions + 1) % opt_.recheck_every == 0) {
    int k = e.recheck_next % static_cast<int>(c.size() - 1);
    const int idx = k < best ? k : k + 1;  // the k-th of the others
    const ImplStats* s = e.Find(c[static_cast<size_t>(idx)]);
    return {idx, DecisionKind::kRecheck, s ? s->ewma_ns : 0};
  }
  const ImplStats* s = e.Find(c[static_cast<size_t>(best)]);
  return {best, DecisionKind::kTuned, s->ewma_ns > 0 ? s->ewma_ns : best_ns};
}

Decision TuningTable::Peek(BucketEntry* e, absl::Span<const ImplDef* const> c) {
  if (e == nullptr) return {};
  std::lock_guard<std::mutex> lock(e->mu);
  return DecideLocked(*e, c);
}

Decision TuningTable::Static(BucketEntry* e, const ImplDef* impl) {
  Decision d;
  if (e == nullptr) return d;
  std::lock_guard<std::mutex> lock(e->mu);
  if (const ImplStats* s = e->Find(impl)) d.expected_ns = s->ewma_ns;
  return d;
}

Decision TuningTable::Take(BucketEntry* e, absl::Span<const ImplDef* const> c,
                           TuningTicket* ticket) {
  if (e == nullptr || c.empty()) {
    decisions_[static_cast<int>(DecisionKind::kStatic)].fetch_add(1, std::memory_order_relaxed);
    *ticket = {e, c.empty() ? nullptr : c[0], false};
    return {};
  }
  Decision d;
  {
    std::lock_guard<std::mutex> lock(e->mu);
    d = DecideLocked(*e, c);
    const ImplDef* impl = c[static_cast<size_t>(d.index)];
    bool warmup = false;
    if (d.kind == DecisionKind::kExplore || d.kind == DecisionKind::kRecheck) {
      ImplStats& s = FindOrAdd(*e, impl);
      ++s.issued;
      if (d.kind == DecisionKind::kExplore && s.warmups < opt_.warmup_runs) {
        ++s.warmups;
        warmup = true;
      }
    }
    if (d.kind == DecisionKind::kRecheck) ++e->recheck_next;
    if (d.kind == DecisionKind::kTuned || d.kind == DecisionKind::kRecheck) ++e->decisions;
    *ticket = {e, impl, d.kind == DecisionKind::kExplore || d.kind == DecisionKind::kRecheck,
               warmup};
  }
  decisions_[static_cast<int>(d.kind)].fetch_add(1, std::memory_order_relaxed);
  return d;
}

void TuningTable::Record(const TuningTicket& t, int64_t ns) {
  if (t.entry == nullptr || t.impl == nullptr || ns < 0) return;
  std::lock_guard<std::mutex> lock(t.entry->mu);
  ImplStats& s = FindOrAdd(*t.entry, t.impl);
  ++s.runs;
  if (opt_.mode == TuningMode::kOnline && t.warmup) {
    // A cold run: its cost counts, its time decides nothing.
    ++t.entry->explore_runs;
    t.entry->explore_ns += ns;
    return;
  }
  s.ewma_ns = s.ewma_ns == 0 ? ns : s.ewma_ns + (ns - s.ewma_ns) / 8;
  if (opt_.mode != TuningMode::kOnline) return;  // frozen and off: decisions never change
  // The best median of the others, before this run counts.
  int64_t best = 0;
  for (const ImplStats& o : t.entry->impls)
    if (&o != &s && o.nsamples > 0 && (best == 0 || o.Median() < best)) best = o.Median();
  AddSample(s, ns);
  if (t.exploring) {
    ++t.entry->explore_runs;
    t.entry->explore_ns += ns;
    if (s.nsamples == 2 && best > 0 &&
        static_cast<double>(std::min(s.samples[0], s.samples[1])) > opt_.abandon_factor * best)
      s.abandoned = true;
  }
}

int64_t TuningTable::exploration_ns() const {
  int64_t total = 0;
  std::shared_lock lock(mu_);
  for (auto& [key, entry] : buckets_) {
    auto& e = const_cast<BucketEntry&>(entry);
    std::lock_guard<std::mutex> elock(e.mu);
    int64_t best = 0;
    for (const ImplStats& s : e.impls)
      if (s.nsamples > 0 && (best == 0 || s.Median() < best)) best = s.Median();
    total += std::max<int64_t>(0, e.explore_ns - e.explore_runs * best);
  }
  return total;
}

int64_t TuningTable::size() const {
  std::shared_lock lock(mu_);
  return static_cast<int64_t>(buckets_.size());
}

std::vector<TuningRow> TuningTable::Rows(const std::string& op) const {
  std::vector<TuningRow> out;
  std::shared_lock lock(mu_);
  for (auto& [key, entry] : buckets_) {
    if (!op.empty() && key.op->name != op) continue;
    auto& e = const_cast<BucketEntry&>(entry);
    std::lock_guard<std::mutex> elock(e.mu);
    const ImplStats* best = nullptr;
    for (const ImplStats& s : e.impls)
      if (s.nsamples > 0 && (best == nullptr || s.Median() < best->Median())) best = &s;
    for (const ImplStats& s : e.impls) {
      TuningRow r;
      r.op = key.op->name;
      r.impl = s.impl->backend;
      r.dtypes = BucketDTypes(key.bucket, static_cast<int>(key.op->inputs.size()));
      r.bucket = BucketDims(*key.op, key.bucket);
      r.model = models_[static_cast<size_t>(key.model)];
      r.runs = s.runs;
      r.median_ns = s.Median();
      r.ewma_ns = s.ewma_ns;
      for (int i = 0; i < s.nsamples; ++i)
        r.samples.push_back(s.samples[static_cast<size_t>(
            (s.next - s.nsamples + i + ImplStats::kSamples) % ImplStats::kSamples)]);
      r.chosen = &s == best;
      out.push_back(std::move(r));
    }
  }
  std::sort(out.begin(), out.end(), [](const TuningRow& a, const TuningRow& b) {
    return std::tie(a.op, a.model, a.dtypes, a.bucket, a.impl) <
           std::tie(b.op, b.model, b.dtypes, b.bucket, b.impl);
  });
  return out;
}

bool TuningTable::Insert(const TuningRow& row) {
  const OpDef* op = OpRegistry::Global().Find(row.op);
  if (op == nullptr) return false;
  const ImplDef* impl = op->FindImpl(row.impl);
  ShapeBucket b;
  if (impl == nullptr || !ParseBucket(*op, row.bucket, row.dtypes, &b)) return false;
  BucketEntry* e = Bucket({op, b, ModelId(row.model)});
  if (e == nullptr) return false;
  std::lock_guard<std::mutex> lock(e->mu);
  ImplStats& s = FindOrAdd(*e, impl);
  s = ImplStats{};
  s.impl = impl;
  for (int64_t v : row.samples)
    if (v > 0) AddSample(s, v);
  s.runs = std::max<int64_t>(row.runs, s.nsamples);
  s.ewma_ns = row.ewma_ns > 0 ? row.ewma_ns : s.Median();
  // A measured impl counts as explored: a loaded bucket is settled.
  if (s.nsamples > 0) {
    s.issued = std::max(opt_.warmup_runs + opt_.explore_runs, s.nsamples);
    s.warmups = opt_.warmup_runs;
  }
  return true;
}

}  // namespace kerneld::server
