// C entry points over qmm_affine.cuh for the Python runner (ctypes).
#include "qmm_affine.cuh"

#include <cuda_runtime.h>

using namespace mlx::core::cu::qmm_affine;

namespace {

template <typename T, int BITS, int GROUP, int WARPS, int U>
int launch_gemv(const void* x, const void* w, const void* s, const void* b,
                void* out, int M, int N, int K, cudaStream_t st) {
  dim3 grid((N + 15) / 16, (M + 7) / 8);
  qgemv_kernel<T, BITS, GROUP, WARPS, U><<<grid, WARPS * 32, 0, st>>>(
      (const T*)x, (const uint32_t*)w, (const T*)s, (const T*)b, (T*)out, M,
      N, K);
  return int(cudaGetLastError());
}

template <typename T, int BITS, int GROUP>
int gemv_variant(int variant, const void* x, const void* w, const void* s,
                 const void* b, void* out, int M, int N, int K,
                 cudaStream_t st) {
  switch (variant) {
    case 0:
      return launch_gemv<T, BITS, GROUP, 4, 2>(x, w, s, b, out, M, N, K, st);
    case 1:
      return launch_gemv<T, BITS, GROUP, 4, 4>(x, w, s, b, out, M, N, K, st);
    case 2:
      return launch_gemv<T, BITS, GROUP, 8, 2>(x, w, s, b, out, M, N, K, st);
    case 3:
      return launch_gemv<T, BITS, GROUP, 2, 4>(x, w, s, b, out, M, N, K, st);
    case 4:
      return launch_gemv<T, BITS, GROUP, 8, 1>(x, w, s, b, out, M, N, K, st);
    default:
      return -1;
  }
}

template <typename T, int BITS>
int gemv_group(int group, int variant, const void* x, const void* w,
               const void* s, const void* b, void* out, int M, int N, int K,
               cudaStream_t st) {
  switch (group) {
    case 32:
      return gemv_variant<T, BITS, 32>(variant, x, w, s, b, out, M, N, K, st);
    case 64:
      return gemv_variant<T, BITS, 64>(variant, x, w, s, b, out, M, N, K, st);
    case 128:
      return gemv_variant<T, BITS, 128>(variant, x, w, s, b, out, M, N, K, st);
    default:
      return -1;
  }
}

template <typename T, int BITS, int GROUP>
int launch_dequant(const void* w, const void* s, const void* b, void* out,
                   int64_t N, int K, cudaStream_t st) {
  // The same grid as MLX's launcher: 4 words per thread and step.
  int64_t words = N * (K * BITS / 32);
  int64_t blocks = (words + 1023) / 1024;
  int grid = int(blocks < 65536 ? blocks : 65536);
  dequant_kernel<T, BITS, GROUP><<<grid, 256, 0, st>>>(
      (const uint32_t*)w, (const T*)s, (const T*)b, (T*)out, words);
  return int(cudaGetLastError());
}

template <typename T, int BITS>
int dequant_group(int group, const void* w, const void* s, const void* b,
                  void* out, int64_t N, int K, cudaStream_t st) {
  switch (group) {
    case 32:
      return launch_dequant<T, BITS, 32>(w, s, b, out, N, K, st);
    case 64:
      return launch_dequant<T, BITS, 64>(w, s, b, out, N, K, st);
    case 128:
      return launch_dequant<T, BITS, 128>(w, s, b, out, N, K, st);
    default:
      return -1;
  }
}

} // namespace

// dtype: 0 = bf16, 1 = fp16.
extern "C" int qmm_gemv(int dtype, int bits, int group, int variant,
                        const void* x, const void* w, const void* s,
                        const void* b, void* out, int M, int N, int K,
                        void* stream) {
  auto st = (cudaStream_t)stream;
  if (dtype == 0) {
    if (bits == 4)
      return gemv_group<__nv_bfloat16, 4>(group, variant, x, w, s, b, out, M,
                                          N, K, st);
    if (bits == 8)
      return gemv_group<__nv_bfloat16, 8>(group, variant, x, w, s, b, out, M,
                                          N, K, st);
  } else {
    if (bits == 4)
      return gemv_group<__half, 4>(group, variant, x, w, s, b, out, M, N, K,
                                   st);
    if (bits == 8)
      return gemv_group<__half, 8>(group, variant, x, w, s, b, out, M, N, K,
                                   st);
  }
  return -1;
}

extern "C" int qmm_dequant(int dtype, int bits, int group, const void* w,
                           const void* s, const void* b, void* out, int64_t N,
                           int K, void* stream) {
  auto st = (cudaStream_t)stream;
  if (dtype == 0) {
    if (bits == 4)
      return dequant_group<__nv_bfloat16, 4>(group, w, s, b, out, N, K, st);
    if (bits == 8)
      return dequant_group<__nv_bfloat16, 8>(group, w, s, b, out, N, K, st);
  } else {
    if (bits == 4)
      return dequant_group<__half, 4>(group, w, s, b, out, N, K, st);
    if (bits == 8)
      return dequant_group<__half, 8>(group, w, s, b, out, N, K, st);
  }
  return -1;
}
