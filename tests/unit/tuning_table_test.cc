// The tuning table (server/scheduler/tuning_table.h): buckets, the
// exploration bound, determinism, and the tuning file's round trip.
#include "scheduler/tuning_table.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <fstream>

#include "scheduler/shape_bucket.h"
#include "scheduler/tuning_file.h"

namespace kerneld::server {
namespace {

TensorView View(DType dt, Shape shape) {
  TensorView v;
  v.dtype = dt;
  v.shape = std::move(shape);
  v.device = Device::Cpu();
  return v;
}

KernelContext GemmCall(int64_t m, int64_t n, int64_t k, bool tb, DType dt = DType::kFloat32) {
  KernelContext ctx;
  ctx.op = OpRegistry::Global().Find("gemm");
  ctx.inputs = {View(dt, {m, k}), View(dt, tb ? Shape{n, k} : Shape{k, n})};
  ctx.attrs["transpose_b"] = tb;
  return ctx;
}

TEST(ShapeBucket, PowersOfTwoOfTheDeclaredDims) {
  EXPECT_EQ(BucketCode(0), 0);
  EXPECT_EQ(BucketBound(BucketCode(1)), 1);
  EXPECT_EQ(BucketBound(BucketCode(2)), 2);
  EXPECT_EQ(BucketBound(BucketCode(3)), 4);
  EXPECT_EQ(BucketBound(BucketCode(4096)), 4096);
  EXPECT_EQ(BucketBound(BucketCode(4097)), 8192);
  const OpDef& gemm = *OpRegistry::Global().Find("gemm");
  const ShapeBucket a = BucketOf(gemm, GemmCall(9, 4096, 3000, false));
  EXPECT_EQ(BucketDims(gemm, a), "M<=16,N<=4096,K<=4096,transpose_b<=0");
  EXPECT_EQ(BucketDTypes(a, 2), "float32,float32");
  // Same bucket: 16 and 9 round to 16; a different layout or dtype is another.
  EXPECT_EQ(a, BucketOf(gemm, GemmCall(16, 4000, 4096, false)));
  EXPECT_NE(a, BucketOf(gemm, GemmCall(16, 4096, 4096, true)));
  EXPECT_NE(a, BucketOf(gemm, GemmCall(16, 4096, 4096, false, DType::kBFloat16)));
  EXPECT_NE(a, BucketOf(gemm, GemmCall(17, 4096, 4096, false)));
  // The text form parses back to the same bucket.
  ShapeBucket back;
  ASSERT_TRUE(ParseBucket(gemm, BucketDims(gemm, a), BucketDTypes(a, 2), &back));
  EXPECT_EQ(back, a);
  EXPECT_FALSE(ParseBucket(gemm, "M<=15,N<=4096,K<=4096,transpose_b<=0", "", &back));
  EXPECT_FALSE(ParseBucket(gemm, "numel<=16", "", &back));
}

TEST(ShapeBucket, OpsWithoutDimsBucketByElementCount) {
  const OpDef& scale = *OpRegistry::Global().Find("scale");
  ASSERT_TRUE(scale.tune_dims.names.empty());
  KernelContext ctx;
  ctx.inputs = {View(DType::kFloat16, {3, 1000})};
  const ShapeBucket b = BucketOf(scale, ctx);
  EXPECT_EQ(BucketDims(scale, b), "numel<=4096");
  ctx.inputs = {View(DType::kFloat16, {4096})};
  EXPECT_EQ(BucketOf(scale, ctx), b);
}

Status Noop(KernelContext&) { return Status::Ok(); }

struct ThreeImpls {
  OpDef op{"tuned_probe"};
  std::vector<const ImplDef*> cands;  // static rank order
  ThreeImpls() {
    op.Input("x", DTypeSet::All());
    op.Impl("a", Noop).Impl("b", Noop).Impl("c", Noop);
    for (const auto& i : op.impls) cands.push_back(&i);
  }
  TuningKey Key(int model = 0) const { return {&op, ShapeBucket{}, model}; }
};

// Runs `n` requests through the table: impl i takes times[i] ns. Returns
// the backends chosen, in order.
std::vector<std::string> Drive(TuningTable& t, BucketEntry* e, const ThreeImpls& f,
                               const std::vector<int64_t>& times, int n) {
  std::vector<std::string> out;
  for (int r = 0; r < n; ++r) {
    TuningTicket ticket;
    const Decision d = t.Take(e, f.cands, &ticket);
    out.push_back(f.cands[static_cast<size_t>(d.index)]->backend);
    t.Record(ticket, times[static_cast<size_t>(d.index)]);
  }
  return out;
}

TEST(TuningTable, ExploresEachImplABoundedNumberOfTimesThenUsesTheFastest) {
  ThreeImpls f;
  TuningOptions o;
  o.mode = TuningMode::kOnline;
  o.explore_runs = 3;
  o.recheck_every = 0;
  o.abandon_factor = 100;  // no early stop here
  TuningTable t(o);
  BucketEntry* e = t.Bucket(f.Key());
  const auto seq = Drive(t, e, f, {3000, 1000, 2000}, 100);
  // A warm-up and 3 runs each (12 = the bound), then only the fastest.
  EXPECT_EQ(std::count(seq.begin(), seq.begin() + 12, "a"), 4);
  EXPECT_EQ(std::count(seq.begin(), seq.begin() + 12, "b"), 4);
  EXPECT_EQ(std::count(seq.begin(), seq.begin() + 12, "c"), 4);
  EXPECT_EQ(std::count(seq.begin() + 12, seq.end(), "b"), 88);
  EXPECT_EQ(t.decisions(DecisionKind::kExplore), 12);
  EXPECT_EQ(t.decisions(DecisionKind::kTuned), 88);
  // The cost: what the exploring runs (warm-ups too) took beyond as many
  // runs of the best.
  EXPECT_EQ(t.exploration_ns(), 4 * (3000 - 1000) + 4 * (2000 - 1000));
}

TEST(TuningTable, AMuchSlowerImplIsNotExploredFurther) {
  ThreeImpls f;
  TuningOptions o;
  o.mode = TuningMode::kOnline;
  o.explore_runs = 3;
  o.recheck_every = 0;
  TuningTable t(o);
  // c is 50x slower than the best: after its warm-up and two timed runs
  // it is abandoned.
  const auto seq = Drive(t, t.Bucket(f.Key()), f, {1000, 1100, 50000}, 20);
  EXPECT_EQ(std::count(seq.begin(), seq.end(), "c"), 3);
  EXPECT_EQ(t.decisions(DecisionKind::kExplore), 11);
}

// Runs in flight together: the warm-up is the run handed out first, even
// when a later one finishes first; and one cold sample (another exact shape
// of the bucket) does not abandon an impl that is the fastest when warm.
TEST(TuningTable, TheWarmUpIsTheFirstHandedOutAndOneColdSampleAbandonsNothing) {
  ThreeImpls f;
  TuningOptions o;
  o.mode = TuningMode::kOnline;
  o.explore_runs = 3;
  o.recheck_every = 0;
  TuningTable t(o);
  BucketEntry* e = t.Bucket(f.Key());
  const std::vector<const ImplDef*> two = {f.cands[0], f.cands[1]};
  auto take = [&](TuningTicket* k) {
    return f.cands[static_cast<size_t>(t.Take(e, two, k).index)];
  };
  // a: warm-up and 3 timed runs, 1.5 us each.
  for (int i = 0; i < 4; ++i) {
    TuningTicket k;
    ASSERT_EQ(take(&k), f.cands[0]);
    t.Record(k, 1500);
  }
  // b: its warm-up and first timed run handed out together; the timed run
  // finishes first (a cold 30 us: another shape), then the warm-up.
  TuningTicket warm, first;
  ASSERT_EQ(take(&warm), f.cands[1]);
  ASSERT_EQ(take(&first), f.cands[1]);
  EXPECT_TRUE(warm.warmup);
  EXPECT_FALSE(first.warmup);
  t.Record(first, 30000);
  t.Record(warm, 40000);
  // Two more timed runs of b, warm at 1 us: b is kept and chosen.
  for (int i = 0; i < 2; ++i) {
    TuningTicket k;
    ASSERT_EQ(take(&k), f.cands[1]);
    t.Record(k, 1000);
  }
  const Decision p = t.Peek(e, two);
  EXPECT_EQ(p.kind, DecisionKind::kTuned);
  EXPECT_EQ(p.index, 1);
}

// An impl's first run of a shape pays one-time costs (on the H100, cuBLASLt's
// plan: 260-340 us against 7-47 us warm). Without the warm-up that run was
// b's first sample, 20x a's median: b was abandoned and the slower a chosen.
TEST(TuningTable, AColdFirstRunDecidesNothing) {
  ThreeImpls f;
  TuningOptions o;
  o.mode = TuningMode::kOnline;
  o.explore_runs = 3;
  o.recheck_every = 0;
  TuningTable t(o);
  BucketEntry* e = t.Bucket(f.Key());
  int runs_of_b = 0;
  std::vector<std::string> seq;
  for (int r = 0; r < 40; ++r) {
    TuningTicket ticket;
    const Decision d = t.Take(e, {f.cands[0], f.cands[1]}, &ticket);
    const std::string impl = f.cands[static_cast<size_t>(d.index)]->backend;
    seq.push_back(impl);
    int64_t ns = 1500;                                      // a: always 1.5 us
    if (impl == "b") ns = runs_of_b++ == 0 ? 30000 : 1000;  // b: cold once, then 1 us
    t.Record(ticket, ns);
  }
  EXPECT_EQ(std::count(seq.begin(), seq.begin() + 8, "b"), 4);
  EXPECT_EQ(std::count(seq.begin() + 8, seq.end(), "b"), 32);
  // The warm-up is no sample: b's median and expected latency are warm.
  const Decision p = t.Peek(e, {f.cands[0], f.cands[1]});
  EXPECT_EQ(p.index, 1);
  EXPECT_EQ(p.expected_ns, 1000);
}

TEST(TuningTable, RechecksNowAndThenAndFollowsAChange) {
  ThreeImpls f;
  TuningOptions o;
  o.mode = TuningMode::kOnline;
  o.explore_runs = 1;
  o.warmup_runs = 0;  // the re-checks are the subject
  o.recheck_every = 10;
  TuningTable t(o);
  BucketEntry* e = t.Bucket(f.Key());
  auto seq = Drive(t, e, f, {1000, 2000, 3000}, 103);
  // After 3 explorations, 100 decisions: 10 are re-checks, alternating b, c.
  EXPECT_EQ(std::count(seq.begin() + 3, seq.end(), "a"), 90);
  EXPECT_EQ(t.decisions(DecisionKind::kRecheck), 10);
  // a got slow: re-checks of b fill its samples and b takes over.
  seq = Drive(t, e, f, {9000, 2000, 3000}, 200);
  EXPECT_GE(std::count(seq.end() - 50, seq.end(), "b"), 45);
}

TEST(TuningTable, DecisionsAreAFunctionOfTheTable) {
  ThreeImpls f;
  TuningOptions o;
  o.mode = TuningMode::kOnline;
  o.recheck_every = 7;
  TuningTable t1(o), t2(o);
  const std::vector<int64_t> times = {1500, 1400, 1600};
  EXPECT_EQ(Drive(t1, t1.Bucket(f.Key()), f, times, 300),
            Drive(t2, t2.Bucket(f.Key()), f, times, 300));
  // Peek says what Take will do, and changes nothing.
  BucketEntry* e = t1.Bucket(f.Key());
  for (int i = 0; i < 20; ++i) {
    const Decision p = t1.Peek(e, f.cands);
    EXPECT_EQ(t1.Peek(e, f.cands).index, p.index);
    TuningTicket ticket;
    EXPECT_EQ(t1.Take(e, f.cands, &ticket).index, p.index);
    t1.Record(ticket, times[static_cast<size_t>(p.index)]);
  }
}

TEST(TuningTable, FrozenNeverExploresAndOffIsStatic) {
  ThreeImpls f;
  TuningOptions o;
  o.mode = TuningMode::kFrozen;
  TuningTable t(o);
  BucketEntry* e = t.Bucket(f.Key());
  // Nothing measured: the static rank (the first candidate).
  EXPECT_EQ(Drive(t, e, f, {3000, 1000, 2000}, 5), std::vector<std::string>(5, "a"));
  EXPECT_EQ(t.decisions(DecisionKind::kExplore), 0);
  o.mode = TuningMode::kOff;
  TuningTable off(o);
  EXPECT_EQ(off.Peek(off.Bucket(f.Key()), f.cands).kind, DecisionKind::kStatic);
}

TEST(TuningTable, AFullTableRanksNewBucketsStatically) {
  ThreeImpls f;
  TuningOptions o;
  o.mode = TuningMode::kOnline;
  o.max_buckets = 1;
  TuningTable t(o);
  EXPECT_NE(t.Bucket(f.Key(0)), nullptr);
  EXPECT_EQ(t.Bucket(f.Key(1)), nullptr);
  EXPECT_NE(t.Bucket(f.Key(0)), nullptr);  // an existing one is still found
  TuningTicket ticket;
  EXPECT_EQ(t.Take(nullptr, f.cands, &ticket).kind, DecisionKind::kStatic);
}

std::string TempPath(const char* name) {
  return ::testing::TempDir() + "/" + name + "_" + std::to_string(getpid());
}

TEST(TuningFile, RoundTripKeepsTheChoiceAndAStaleStampIsIgnored) {
  const OpDef& op = *OpRegistry::Global().Find("_test_two_speed");
  std::vector<const ImplDef*> cands;  // static order: _test_slow ranks first
  cands.push_back(op.FindImpl("_test_slow"));
  cands.push_back(op.FindImpl("cpu"));
  TuningOptions o;
  o.mode = TuningMode::kOnline;
  o.recheck_every = 0;
  TuningTable t(o);
  KernelContext ctx;
  ctx.inputs = {View(DType::kFloat32, {100})};
  const TuningKey key{&op, BucketOf(op, ctx), t.ModelId("Test CPU\twith a tab")};
  BucketEntry* e = t.Bucket(key);
  for (int i = 0; i < 10; ++i) {
    TuningTicket ticket;
    const Decision d = t.Take(e, cands, &ticket);
    t.Record(ticket, d.index == 0 ? 3'000'000 : 300'000);
  }
  TuningTicket ticket;
  ASSERT_EQ(cands[static_cast<size_t>(t.Peek(e, cands).index)]->backend, "cpu");

  const std::string path = TempPath("tuning");
  const TuningStamp stamp{"0.1+abc", "Test CPU", 0, 0};
  ASSERT_TRUE(SaveTuningFile(t, stamp, path).ok());
  TuningTable loaded(o);
  std::string note;
  ASSERT_TRUE(LoadTuningFile(path, stamp, &loaded, &note).ok());
  EXPECT_NE(note.find("2 rows loaded"), std::string::npos) << note;
  // The tab in the model name became a space on disk.
  BucketEntry* le = loaded.FindBucket({&op, key.bucket, loaded.ModelId("Test CPU with a tab")});
  ASSERT_NE(le, nullptr);
  const Decision d = loaded.Take(le, cands, &ticket);
  EXPECT_EQ(d.kind, DecisionKind::kTuned);  // settled: no exploration after a restart
  EXPECT_EQ(cands[static_cast<size_t>(d.index)]->backend, "cpu");
  const auto before = t.Rows(), after = loaded.Rows();
  ASSERT_EQ(after.size(), before.size());
  for (size_t i = 0; i < after.size(); ++i) {
    EXPECT_EQ(after[i].impl, before[i].impl);
    EXPECT_EQ(after[i].median_ns, before[i].median_ns);
    EXPECT_EQ(after[i].samples, before[i].samples);
    EXPECT_EQ(after[i].chosen, before[i].chosen);
  }

  // Another driver: ignored, with the reason.
  TuningTable stale(o);
  ASSERT_TRUE(LoadTuningFile(path, {"0.1+abc", "Test CPU", 1, 0}, &stale, &note).ok());
  EXPECT_EQ(stale.size(), 0);
  EXPECT_NE(note.find("ignored"), std::string::npos) << note;
  EXPECT_NE(note.find("driver 0"), std::string::npos) << note;

  // A malformed file is an error naming the line; a missing one is not.
  {
    std::ofstream f(path, std::ios::trunc);
    f << "kerneld-tuning 1\nstamp\t0.1+abc\tTest CPU\t0\t0\nrow\tonly three\tfields\n";
  }
  Status st = LoadTuningFile(path, stamp, &stale, &note);
  EXPECT_EQ(st.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(st.message().find("line 3"), std::string::npos) << st.message();
  std::remove(path.c_str());
  EXPECT_TRUE(LoadTuningFile(path, stamp, &stale, &note).ok());
  EXPECT_NE(note.find("not found"), std::string::npos);
}

}  // namespace
}  // namespace kerneld::server
