// What sm90_variant.cu exports for sm90_bench.cu.
#pragma once

#include <cuda_runtime.h>

// The one group size the variants are compiled for.
constexpr int kGroupSize = 64;

struct Problem {
  int m, n, k;
  const void* x; // [m, k] bf16
  const void* w; // [n, k / 8] uint32, 4-bit
  const void* scales; // [k / kGroupSize, n] bf16
  const void* biases; // [k / kGroupSize, n] bf16
  void* out; // [m, n] bf16
};

struct Launch {
  int swizzle; // the tile scheduler's max_swizzle_size
  int raster; // 0 heuristic, 1 along M (w rows), 2 along N (x rows)
};

struct Variant {
  const char* name;
  int smem_bytes;
  const char* (*run)(const Problem&, const Launch&, cudaStream_t);
};
