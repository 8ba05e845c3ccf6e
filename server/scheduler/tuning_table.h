// The tuning table: measured execution times per (op, implementation,
// dtypes, shape bucket, device model), and the rule that turns them into a
// choice of implementation (docs/architecture.md, "Online tuning").
//
// Online: a bucket seen for the first time runs each eligible impl
// `warmup_runs` + `explore_runs` times (in static rank order). The warm-ups
// are timed for the exploration cost but decide nothing: an impl's first
// run of a shape pays one-time costs (cuBLASLt's plan and heuristic, a
// kernel module's lazy load) that can be 10-30x its steady time, and ruled
// the choice on the H100 until they were set aside. An impl whose first
// two samples are both more than `abandon_factor` times the best so far is
// not run again (one sample can still be cold: another exact shape of the
// bucket, another GPU of the model). Then the bucket
// uses the impl with the lowest median of its last kSamples runs; every
// `recheck_every`-th decision of a settled bucket runs one of the others
// (round robin) so a change is noticed. Frozen: the table as loaded
// decides, nothing is explored and no decision changes. A bucket with no
// measurement (frozen, a full table, or tuning off) falls back to the static
// rank (ImplDef::PriorityFor). Every decision is a function of the table's
// contents and the candidates alone: no clock, no randomness.
#pragma once

#include <array>
#include <atomic>
#include <cstdint>
#include <mutex>
#include <shared_mutex>
#include <string>
#include <vector>

#include "absl/container/node_hash_map.h"
#include "absl/types/span.h"
#include "kerneld/op.h"
#include "scheduler/shape_bucket.h"

namespace kerneld::server {

enum class TuningMode { kOff, kFrozen, kOnline };
// "off", "frozen", "online"; false for anything else.
bool ParseTuningMode(const std::string& s, TuningMode* out);
const char* TuningModeName(TuningMode m);

struct TuningOptions {
  TuningMode mode = TuningMode::kFrozen;
  int explore_runs = 3;       // runs of each eligible impl in a new bucket
  int warmup_runs = 1;        // runs before those, which decide nothing
  int recheck_every = 1000;   // a settled bucket re-times another impl once per this many
  int max_buckets = 4096;     // new buckets past this are not explored (static rank)
  double abandon_factor = 4;  // first run above this x the best: explored no further
};

struct TuningKey {
  const OpDef* op = nullptr;
  ShapeBucket bucket;
  int model = 0;  // TuningTable::ModelId of the device's model name
  bool operator==(const TuningKey&) const = default;
  template <typename H>
  friend H AbslHashValue(H h, const TuningKey& k) {
    return H::combine(std::move(h), k.op, k.bucket, k.model);
  }
};

// One implementation's measurements in one bucket.
struct ImplStats {
  static constexpr int kSamples = 8;  // the median is over the last kSamples runs
  const ImplDef* impl = nullptr;
  int issued = 0;                           // exploration and re-check runs handed out
  int64_t runs = 0;                         // runs measured (every run, whatever chose it)
  int warmups = 0;                          // warm-ups handed out (not samples, not in ewma_ns)
  std::array<int64_t, kSamples> samples{};  // ring of the runs that decide
  int nsamples = 0, next = 0;
  int64_t ewma_ns = 0;  // every run (also frozen): the latency placement expects
  bool abandoned = false;
  int64_t Median() const;  // 0 without samples
};

struct BucketEntry {
  std::mutex mu;
  std::vector<ImplStats> impls;  // a handful: found by a scan
  int64_t decisions = 0;         // made by this bucket once settled
  int recheck_next = 0;          // round robin over the non-chosen impls
  // Exploring and re-checking runs (online): their count and total time,
  // for the cost (TuningTable::exploration_ns).
  int64_t explore_runs = 0, explore_ns = 0;
  ImplStats* Find(const ImplDef* impl);
};

enum class DecisionKind { kStatic, kExplore, kRecheck, kTuned };
const char* DecisionKindName(DecisionKind k);

struct Decision {
  int index = 0;  // into the candidates
  DecisionKind kind = DecisionKind::kStatic;
  int64_t expected_ns = 0;  // the chosen impl's measured latency; 0 unknown
};

// Handed out with a decision, given back with the run's time (Record).
struct TuningTicket {
  BucketEntry* entry = nullptr;
  const ImplDef* impl = nullptr;
  bool exploring = false;
  // A warm-up (TuningOptions::warmup_runs): decided when handed out, so a
  // later run that finishes first is not the one set aside.
  bool warmup = false;
};

// A row of the table, for ListKernels, the tuning file and the docs.
struct TuningRow {
  std::string op, impl, dtypes, bucket, model;
  int64_t runs = 0, median_ns = 0, ewma_ns = 0;
  std::vector<int64_t> samples;  // oldest first
  bool chosen = false;           // the bucket's current choice
};

class TuningTable {
 public:
  explicit TuningTable(TuningOptions opt = {}) : opt_(opt) {}

  const TuningOptions& options() const { return opt_; }
  int ModelId(const std::string& model);  // interned
  std::string ModelName(int id) const;

  // The bucket for `key`, made if new and the table has room; nullptr
  // otherwise (the caller ranks statically).
  BucketEntry* Bucket(const TuningKey& key);
  BucketEntry* FindBucket(const TuningKey& key) const;

  // What the table would choose among `candidates` (static rank order,
  // best first), without counting it: placement compares devices with it.
  Decision Peek(BucketEntry* e, absl::Span<const ImplDef* const> candidates);
  // The same decision, counted (an exploration run is handed out).
  Decision Take(BucketEntry* e, absl::Span<const ImplDef* const> candidates, TuningTicket* ticket);
  // The static choice (the first candidate), with its measured latency.
  Decision Static(BucketEntry* e, const ImplDef* impl);
  // A finished run of ticket.impl took execute_ns.
  void Record(const TuningTicket& ticket, int64_t execute_ns);

  // Rows, optionally of one op; sorted by op, model, dtypes, bucket, impl.
  std::vector<TuningRow> Rows(const std::string& op = "") const;
  // Puts a row's measurements back (the tuning file); false: the op, impl
  // or bucket is unknown here.
  bool Insert(const TuningRow& row);

  int64_t size() const;  // buckets
  // Counters for kerneld_tuning_*.
  int64_t decisions(DecisionKind k) const { return decisions_[static_cast<int>(k)].load(); }
  // The cost of exploring so far: over every bucket, the time its exploring
  // and re-checking runs took beyond as many runs of its fastest impl
  // (by median). Walks the table: for scrapes, not requests.
  int64_t exploration_ns() const;

 private:
  Decision DecideLocked(BucketEntry& e, absl::Span<const ImplDef* const> c) const;
  TuningOptions opt_;
  mutable std::shared_mutex mu_;
  absl::node_hash_map<TuningKey, BucketEntry> buckets_;
  std::vector<std::string> models_;  // guarded by mu_
  std::array<std::atomic<int64_t>, 4> decisions_{};
};

}  // namespace kerneld::server
