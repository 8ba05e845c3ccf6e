#!/usr/bin/env bash
# Compares two kernel_bench binaries on this GPU, in one run (interleaved, so
# clocks and temperature are shared): the ratio columns ("vs copy" for
# memory-bound ops, "vs cublas" for gemm) per op x dtype x shape x impl,
# side by side, with the rows whose ratio moved by more than TOL flagged.
#   bench/kernel_bench_compare.sh OLD_BENCH NEW_BENCH [kernel_bench args...]
# Exit status 1 when a row moved by more than TOL (default 0.02).
set -uo pipefail
old=$1 new=$2
shift 2
TOL=${TOL:-0.02}
OUT=${OUT:-.}
"$old" "$@" >"$OUT/kernel_bench_old.txt" 2>&1
"$new" "$@" >"$OUT/kernel_bench_new.txt" 2>&1
# Memory-bound rows: op dtype shape impl us GB/s copyGB/s ratio.
# gemm rows: gemm dtype MxNxK impl t us tflops TFLOP/s gbs GB/s vs cublas R ...
key_ratio() {
  awk '$1 == "gemm" && $4 != "" { for (i = 1; i <= NF; ++i) if ($i == "cublas" && $(i-1) == "vs") { print $1" "$2" "$3" "$4, $(i+1); next } }
       NF == 8 && $8 ~ /^[0-9.]+$/ { print $1" "$2" "$3" "$4, $8 }' "$1"
}
join -t, <(key_ratio "$OUT/kernel_bench_old.txt" | sed 's/ \([^ ]*\)$/,\1/' | sort) \
         <(key_ratio "$OUT/kernel_bench_new.txt" | sed 's/ \([^ ]*\)$/,\1/' | sort) |
  awk -F, -v tol="$TOL" 'BEGIN { printf "%-48s %7s %7s %7s\n", "op dtype shape impl", "old", "new", "diff"; bad = 0 }
    { d = $3 - $2; flag = (d > tol || d < -tol) ? "  <-- moved" : ""; if (flag != "") bad = 1
      printf "%-48s %7.2f %7.2f %+7.2f%s\n", $1, $2, $3, d, flag }
    END { exit bad }'
