// The norms' split-row plan (kernels/common/cuda/split_row_plan.h), which
// the AOT launchers and the JIT plans share: few wide rows go over clusters
// on sm_90+ and every launch it gives covers the row within the kernels'
// bounds. Host code: no GPU needed.
#include <gtest/gtest.h>

#include "common/cuda/split_row_plan.h"

namespace kerneld::cuda {
namespace {

constexpr int kH100Sms = 132;

// Every pack of the row belongs to one block and one thread's items.
void ExpectCovers(const SplitRowPlan& p, int64_t units, int max_items) {
  ASSERT_GE(p.cluster, 2);
  EXPECT_LE(p.cluster, kSplitMaxCluster);
  EXPECT_GE(p.chunk * p.cluster, units);
  EXPECT_LT(p.chunk * (p.cluster - 1), units);  // the last block has packs too
  EXPECT_LE(p.threads, static_cast<unsigned>(kSplitMaxThreads));
  EXPECT_EQ(p.threads % 32, 0u);
  EXPECT_LE(p.items, max_items);
  EXPECT_GE(int64_t{p.threads} * p.items, p.chunk);
}

TEST(SplitRowPlan, FewWideRowsSplitOnHopper) {
  // 16-byte packs of float16 / bfloat16: hidden 16384, 32768.
  for (int64_t rows : {1, 16, 32}) {
    for (int64_t units : {2048, 4096}) {
      const SplitRowPlan p = PlanSplitRows(rows, units, 16, 4, kH100Sms, 90);
      ExpectCovers(p, units, 4);
      // A block for every SM, else as many as a cluster has, else blocks
      // of less than twice the 2 KiB floor.
      EXPECT_TRUE(rows * p.cluster >= kH100Sms || p.cluster == kSplitMaxCluster ||
                  p.chunk * 16 < 2 * kSplitMinChunkBytes)
          << rows << " x " << units << ": clusters of " << p.cluster;
    }
  }
  // The scalar path (a misaligned or odd-width bfloat16 row): 2-byte packs.
  ExpectCovers(PlanSplitRows(16, 32767, 2, 8, kH100Sms, 90), 32767, 8);
  ExpectCovers(PlanSplitRows(1, 65536, 2, 8, kH100Sms, 90), 65536, 8);
}

TEST(SplitRowPlan, OtherShapesKeepOneBlockARow) {
  EXPECT_EQ(PlanSplitRows(16, 2048, 16, 4, kH100Sms, 80).cluster, 0);  // no clusters before sm_90
  EXPECT_EQ(PlanSplitRows(kH100Sms, 4096, 16, 4, kH100Sms, 90).cluster, 0);  // rows fill the GPU
  EXPECT_EQ(PlanSplitRows(16, 512, 16, 4, kH100Sms, 90).cluster, 0);  // hidden 4096: one block
  EXPECT_EQ(PlanSplitRows(16, 1024, 16, 4, kH100Sms, 90).cluster, 0);  // hidden 8192: faster whole
  EXPECT_EQ(PlanSplitRows(64, 4096, 16, 4, kH100Sms, 90).cluster, 0);  // 64 rows: faster whole
  EXPECT_EQ(PlanSplitRows(0, 4096, 16, 4, kH100Sms, 90).cluster, 0);
  // Wider than 16 blocks of 512 threads x 4 packs cache: not split.
  EXPECT_EQ(PlanSplitRows(1, 16 * 512 * 4 + 1, 16, 4, kH100Sms, 90).cluster, 0);
}

TEST(SplitRowPlan, ForcedSizesApplyToAnyShape) {
  const int old = g_force_split_rows.exchange(8);
  SplitRowPlan p = PlanSplitRows(1000, 3, 16, 4, kH100Sms, 90);
  EXPECT_EQ(p.cluster, 8);  // more blocks than packs: some get none
  EXPECT_EQ(p.chunk, 1);
  EXPECT_EQ(p.threads, 32u);
  p = PlanSplitRows(1, 30000, 16, 4, kH100Sms, 90);  // raised to what caches the row
  ExpectCovers(p, 30000, 4);
  EXPECT_EQ(p.cluster, 16);
  EXPECT_EQ(PlanSplitRows(1, 4096, 16, 4, kH100Sms, 80).cluster, 0);  // still sm_90+
  g_force_split_rows.store(0);
  EXPECT_EQ(PlanSplitRows(16, 4096, 16, 4, kH100Sms, 90).cluster, 0);  // never
  g_force_split_rows.store(old);
}

}  // namespace
}  // namespace kerneld::cuda
