// kernel_bench's shapes for the gated activations (silu_and_mul,
// gelu_and_mul, gelu_tanh_and_mul): x [rows, hidden], hidden = 2 x the MLP's
// intermediate size I, beside the shared decode, mid and large problems.
#pragma once

#include <map>
#include <string>

#include "kerneld/op.h"

namespace kerneld {

inline BenchSpec ActAndMulBench() {
  BenchSpec bench;
  bench.shapes = [](int64_t t, int64_t h) { return std::map<std::string, Shape>{{"x", {t, h}}}; };
  // Decode of gated MLPs, T = 1, 16, 64 tokens at I = 14336 (Llama-3-8B),
  // 18432, 28672 (Llama-3-70B) and 53248 (Llama-3.1-405B): few wide rows,
  // each split over many blocks. i14k4k (4096 tokens, prefill) checks
  // that the plan holds at large T; w32k, w32k64 and w128k are the rows x
  // width that one block a row ran at 0.25-0.47 x copy (H100, 2026-11-26).
  bench.extra = {{"i14k1", 1, 28672},     {"i14k16", 16, 28672},  {"i14k64", 64, 28672},
                 {"i18k1", 1, 36864},     {"i18k16", 16, 36864},  {"i18k64", 64, 36864},
                 {"i28k1", 1, 57344},     {"i28k16", 16, 57344},  {"i28k64", 64, 57344},
                 {"i52k1", 1, 106496},    {"i52k16", 16, 106496}, {"i52k64", 64, 106496},
                 {"i14k4k", 4096, 28672}, {"w32k", 16, 32768},    {"w32k64", 64, 32768},
                 {"w128k", 16, 128256}};
  return bench;
}

}  // namespace kerneld
