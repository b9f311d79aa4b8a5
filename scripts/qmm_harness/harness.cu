// C entry points over qmm_affine.cuh for the Python runner (ctypes).
#include "qmm_affine.cuh"
#include "qmm_mma.cuh"

#include <cuda_runtime.h>

#include <type_traits>

using namespace mlx::core::cu::qmm_affine;

namespace {

// One GEMV call: B products of M rows each; lhs/rhs null for a dense call
// (B = 1), as MLX's launcher does.
struct Gemv {
  const void* x;
  const void* w;
  const void* s;
  const void* b;
  void* out;
  const uint32_t* lhs;
  const uint32_t* rhs;
  int M, N, K, B;
  cudaStream_t st;
  // gather_qmm_tiles_kernel over sorted indices: E experts and room for
  // gather_expert_tiles_kernel's table (null: tiles of consecutive rows).
  int E = 0;
  int64_t* tiles = nullptr;
};

// DQ: qgemv_block (dequantize first) for dense 4-bit calls too.
template <typename T, int BITS, int GROUP, int WARPS, int U, bool DQ = false>
int launch_gemv(const Gemv& a) {
  if ((a.M + 7) / 8 > 65535 || a.B > 65535 || a.B < 1) return -2;
  dim3 grid((a.N + 15) / 16, (a.M + 7) / 8, a.B);
  if (a.rhs != nullptr) {
    gather_qgemv_kernel<T, BITS, GROUP, WARPS, U>
        <<<grid, WARPS * 32, 0, a.st>>>(
            (const T*)a.x, (const uint32_t*)a.w, (const T*)a.s,
            (const T*)a.b, (T*)a.out, a.lhs, a.rhs, a.M, a.N, a.K);
  } else if (BITS == 4 && !DQ) {
    // As MLX's launcher: dense 4-bit calls take qgemv_block_q4.
    qgemv_q4_kernel<T, GROUP, WARPS><<<grid, WARPS * 32, 0, a.st>>>(
        (const T*)a.x, (const uint32_t*)a.w, (const T*)a.s, (const T*)a.b,
        (T*)a.out, a.M, a.N, a.K);
  } else {
    qgemv_kernel<T, BITS, GROUP, WARPS, U><<<grid, WARPS * 32, 0, a.st>>>(
        (const T*)a.x, (const uint32_t*)a.w, (const T*)a.s, (const T*)a.b,
        (T*)a.out, a.M, a.N, a.K);
  }
  return int(cudaGetLastError());
}

template <typename T, int BITS, int GROUP>
int gemv_variant(int variant, const Gemv& a) {
  switch (variant) {
    case 0:
      return launch_gemv<T, BITS, GROUP, 4, 2>(a);
    case 1:
      return launch_gemv<T, BITS, GROUP, 4, 4>(a);
    case 2:
      return launch_gemv<T, BITS, GROUP, 8, 2>(a);
    case 3:
      return launch_gemv<T, BITS, GROUP, 2, 4>(a);
    case 4:
      return launch_gemv<T, BITS, GROUP, 8, 1>(a);
    case 5:
      return launch_gemv<T, BITS, GROUP, 4, 2, true>(a);
    default:
      return -1;
  }
}

template <typename T, int BITS, int GROUP, int R>
int launch_rows(const Gemv& a) {
  int64_t rows = int64_t(a.B) * a.M;
  // As MLX's launcher: 8 warps of 16 weight rows each.
  dim3 grid(uint32_t((rows + 8 * R - 1) / (8 * R)), (a.N + 127) / 128);
  gather_qgemv_rows_kernel<T, BITS, GROUP, 8, 2, R><<<grid, 256, 0, a.st>>>(
      (const T*)a.x, (const uint32_t*)a.w, (const T*)a.s, (const T*)a.b,
      (T*)a.out, a.lhs, a.rhs, a.M, a.N, a.K, rows);
  return int(cudaGetLastError());
}

template <typename T, int BITS, int GROUP, int WARPS, int R, int NT, int KC>
int launch_tiles(const Gemv& a) {
  int64_t rows = int64_t(a.B) * a.M;
  constexpr int smem = gather_qmm_tiles_smem<T, R, KC>();
  auto kernel = a.tiles != nullptr
      ? gather_qmm_tiles_kernel<T, BITS, GROUP, WARPS, R, NT, KC, true>
      : gather_qmm_tiles_kernel<T, BITS, GROUP, WARPS, R, NT, KC, false>;
  if (smem > 48 * 1024) {
    cudaFuncSetAttribute(
        kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, smem);
  }
  // As MLX's launcher: sorted indices add at most one tile per expert.
  int64_t tiles = (rows + 8 * R - 1) / (8 * R);
  if (a.tiles != nullptr) {
    tiles += a.E;
    gather_expert_tiles_kernel<8 * R><<<1, 1024, 0, a.st>>>(
        a.rhs, a.B, a.M, a.E, a.tiles, tiles);
  }
  dim3 grid(uint32_t(tiles), (a.N + 16 * NT * WARPS - 1) / (16 * NT * WARPS));
  kernel<<<grid, WARPS * 32, smem, a.st>>>(
      (const T*)a.x, (const uint32_t*)a.w, (const T*)a.s, (const T*)a.b,
      (T*)a.out, a.lhs, a.rhs, a.tiles, a.M, a.N, a.K, rows);
  return int(cudaGetLastError());
}

template <typename T, int BITS, int GROUP, int WN, int NT, int R, int STAGES>
int launch_mma_gather(const Gemv& a);

// Tile shapes of gather_qmm_tiles_kernel the harness compares: warps, row
// groups of 8, 16-row weight tiles per warp, K per staged chunk. MLX's
// launcher takes variant 0 (chunks of 64 columns for 8-bit weights).
template <typename T, int BITS, int GROUP>
int tiles_variant(int variant, const Gemv& a) {
  switch (variant) {
    case 0:
      return launch_tiles<T, BITS, GROUP, 8, 8, 2, BITS == 4 ? 128 : 64>(a);
    case 1:
      return launch_tiles<T, BITS, GROUP, 8, 8, 1, 128>(a);
    case 2:
      return launch_tiles<T, BITS, GROUP, 8, 4, 1, 128>(a);
    case 3: // qmm_mma_kernel, 64 rows x 256 weight rows, 4 stages, sorted
      return launch_mma_gather<T, BITS, GROUP, 8, 2, 8, 4>(a);
    case 4: // the same, 2 stages (64 KB at 4-bit: sm_86, sm_89, sm_12x)
      return launch_mma_gather<T, BITS, GROUP, 8, 2, 8, 2>(a);
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

template <typename T, int BITS, int GROUP, int WN, int WM, int NT, int R,
          int STAGES>
int launch_mma(const Gemv& a) {
  using S = QmmMmaShape<T, BITS, WN, WM, NT, R, STAGES>;
  auto kernel = qmm_mma_kernel<T, BITS, GROUP, WN, WM, NT, R, STAGES>;
  if (S::SMEM > 48 * 1024) {
    cudaFuncSetAttribute(
        kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, S::SMEM);
  }
  int64_t mt = (int64_t(a.M) + S::BM - 1) / S::BM;
  int64_t nt = (int64_t(a.N) + S::BN - 1) / S::BN;
  if (mt * nt > 0x7fffffff) return -2;
  // Read once: the harness runs on one device.
  static const int l2 = [] {
    int device = 0, bytes = 0;
    cudaGetDevice(&device);
    cudaDeviceGetAttribute(&bytes, cudaDevAttrL2CacheSize, device);
    return bytes;
  }();
  int group_m = qmm_mma_group_m(l2, int64_t(S::BM) * a.K * sizeof(T), mt);
  kernel<<<uint32_t(mt * nt), S::THREADS, S::SMEM, a.st>>>(
      (const T*)a.x, (const uint32_t*)a.w, (const T*)a.s, (const T*)a.b,
      (T*)a.out, a.M, a.N, a.K, group_m, nullptr, nullptr, nullptr);
  return int(cudaGetLastError());
}

// gather_qmm over sorted indices through qmm_mma_kernel: the table of
// one-expert tiles of BM rows first, as for the staged tiles.
template <typename T, int BITS, int GROUP, int WN, int NT, int R, int STAGES>
int launch_mma_gather(const Gemv& a) {
  using S = QmmMmaShape<T, BITS, WN, 1, NT, R, STAGES>;
  if (a.tiles == nullptr) return -3; // one expert per tile: sorted only
  auto kernel = qmm_mma_kernel<T, BITS, GROUP, WN, 1, NT, R, STAGES, true>;
  if (S::SMEM > 48 * 1024) {
    cudaFuncSetAttribute(
        kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, S::SMEM);
  }
  int64_t rows = int64_t(a.B) * a.M;
  int64_t tiles = (rows + S::BM - 1) / S::BM + a.E;
  gather_expert_tiles_kernel<S::BM><<<1, 1024, 0, a.st>>>(
      a.rhs, a.B, a.M, a.E, a.tiles, tiles);
  dim3 grid{uint32_t(tiles), uint32_t((a.N + S::BN - 1) / S::BN)};
  kernel<<<grid, S::THREADS, S::SMEM, a.st>>>(
      (const T*)a.x, (const uint32_t*)a.w, (const T*)a.s, (const T*)a.b,
      (T*)a.out, a.M, a.N, a.K, 0, a.lhs, a.rhs, a.tiles);
  return int(cudaGetLastError());
}

// Tile shapes of qmm_mma_kernel the harness compares: warps across weight
// rows and across rows of x, 16-row weight tiles and 8-row x tiles per
// warp, stages. Variants 5 and 6 fit the 99 KB of shared memory per block
// of sm_86, sm_89 and sm_12x (4-bit: 80 KB).
template <typename T, int BITS, int GROUP>
int mma_variant(int variant, const Gemv& a) {
  switch (variant) {
    case 0: // 256 weight rows x 128 rows of x, 8 warps of 64 x 64
      return launch_mma<T, BITS, GROUP, 4, 2, 4, 8, 4>(a);
    case 1: // 256 x 128, 8 warps of 32 x 128
      return launch_mma<T, BITS, GROUP, 8, 1, 2, 16, 4>(a);
    case 2: // 128 x 256, 8 warps of 32 x 128, 2 stages
      return launch_mma<T, BITS, GROUP, 4, 2, 2, 16, 2>(a);
    case 3: // 128 x 128, 4 warps of 64 x 64
      return launch_mma<T, BITS, GROUP, 2, 2, 4, 8, 4>(a);
    case 4: // variant 0 with 3 stages
      return launch_mma<T, BITS, GROUP, 4, 2, 4, 8, 3>(a);
    case 5: // variant 3 with 2 stages
      return launch_mma<T, BITS, GROUP, 2, 2, 4, 8, 2>(a);
    case 6: // 128 x 128, 8 warps of 32 x 64, 2 stages
      return launch_mma<T, BITS, GROUP, 4, 2, 2, 8, 2>(a);
    default:
      return -1;
  }
}

template <typename T>
struct Tag {
  using type = T;
};
template <int V>
using Int = std::integral_constant<int, V>;

// f(Tag<T>, Int<BITS>, Int<GROUP>) for dtype (0 = bf16, 1 = fp16), bits and
// group size; -1 where the header has no kernel.
template <typename F>
int dispatch(int dtype, int bits, int group, F&& f) {
  auto by_group = [&](auto t, auto b) {
    switch (group) {
      case 32:
        return f(t, b, Int<32>{});
      case 64:
        return f(t, b, Int<64>{});
      case 128:
        return f(t, b, Int<128>{});
      default:
        return -1;
    }
  };
  auto by_bits = [&](auto t) {
    if (bits == 4) return by_group(t, Int<4>{});
    if (bits == 8) return by_group(t, Int<8>{});
    return -1;
  };
  return dtype == 0 ? by_bits(Tag<__nv_bfloat16>{}) : by_bits(Tag<__half>{});
}

int gemv_dispatch(int dtype, int bits, int group, int variant, const Gemv& a) {
  return dispatch(dtype, bits, group, [&](auto t, auto b, auto g) {
    using T = typename decltype(t)::type;
    return gemv_variant<T, decltype(b)::value, decltype(g)::value>(variant, a);
  });
}

// A gather_qmm call as the C entry points receive it.
Gemv gather_call(const void* x, const void* w, const void* s, const void* b,
                 const void* lhs, const void* rhs, void* out, int M, int N,
                 int K, int B, void* stream) {
  return Gemv{x, w, s, b, out, (const uint32_t*)lhs, (const uint32_t*)rhs,
              M, N, K, B, (cudaStream_t)stream};
}

} // namespace

// dtype: 0 = bf16, 1 = fp16.
extern "C" int qmm_gemv(int dtype, int bits, int group, int variant,
                        const void* x, const void* w, const void* s,
                        const void* b, void* out, int M, int N, int K,
                        void* stream) {
  Gemv a{x, w, s, b, out, nullptr, nullptr, M, N, K, 1, (cudaStream_t)stream};
  return gemv_dispatch(dtype, bits, group, variant, a);
}

// gather_qmm: product i multiplies x[lhs[i]] ([M, K]) by expert rhs[i] of
// w [E, N, K * bits / 32] (scales, biases [E, N, K / group]) into out[i].
extern "C" int qmm_gather_gemv(int dtype, int bits, int group, int variant,
                               const void* x, const void* w, const void* s,
                               const void* b, const void* lhs,
                               const void* rhs, void* out, int M, int N,
                               int K, int B, void* stream) {
  Gemv a = gather_call(x, w, s, b, lhs, rhs, out, M, N, K, B, stream);
  return gemv_dispatch(dtype, bits, group, variant, a);
}

// gather_qmm over tiles of 8 * groups rows across products (the rows of the
// B products of M rows laid end to end), one pass per distinct expert of a
// tile; MLX's launcher takes 2 groups.
extern "C" int qmm_gather_rows(int dtype, int bits, int group, int groups,
                               const void* x, const void* w, const void* s,
                               const void* b, const void* lhs,
                               const void* rhs, void* out, int M, int N,
                               int K, int B, void* stream) {
  Gemv a = gather_call(x, w, s, b, lhs, rhs, out, M, N, K, B, stream);
  return dispatch(dtype, bits, group, [&](auto t, auto bt, auto g) {
    using T = typename decltype(t)::type;
    constexpr int BITS = decltype(bt)::value, GROUP = decltype(g)::value;
    if (groups == 1) return launch_rows<T, BITS, GROUP, 1>(a);
    if (groups == 2) return launch_rows<T, BITS, GROUP, 2>(a);
    return -1;
  });
}

// gather_qmm over tiles of many rows staged in shared memory, one pass per
// distinct expert of a tile; variant: tiles_variant's tile shape.
// With tiles (room for 2 * (ceil(B * M / tile rows) + E) int64), rhs sorted
// by expert: tiles that each hold one expert's rows, as MLX runs sorted
// indices.
extern "C" int qmm_gather_tiles(int dtype, int bits, int group, int variant,
                                const void* x, const void* w, const void* s,
                                const void* b, const void* lhs,
                                const void* rhs, void* out, int M, int N,
                                int K, int B, int E, int64_t* tiles,
                                void* stream) {
  Gemv a = gather_call(x, w, s, b, lhs, rhs, out, M, N, K, B, stream);
  a.E = E;
  a.tiles = tiles;
  return dispatch(dtype, bits, group, [&](auto t, auto bt, auto g) {
    using T = typename decltype(t)::type;
    return tiles_variant<T, decltype(bt)::value, decltype(g)::value>(
        variant, a);
  });
}

extern "C" int qmm_dequant(int dtype, int bits, int group, const void* w,
                           const void* s, const void* b, void* out, int64_t N,
                           int K, void* stream) {
  auto st = (cudaStream_t)stream;
  return dispatch(dtype, bits, group, [&](auto t, auto bt, auto g) {
    using T = typename decltype(t)::type;
    return launch_dequant<T, decltype(bt)::value, decltype(g)::value>(
        w, s, b, out, N, K, st);
  });
}

// Fused prefill GEMM on mma.sync (qmm_mma.cuh); variant: mma_variant's
// tile shape.
extern "C" int qmm_mma(int dtype, int bits, int group, int variant,
                       const void* x, const void* w, const void* s,
                       const void* b, void* out, int M, int N, int K,
                       void* stream) {
  Gemv a{x, w, s, b, out, nullptr, nullptr, M, N, K, 1, (cudaStream_t)stream};
  return dispatch(dtype, bits, group, [&](auto t, auto bt, auto g) {
    using T = typename decltype(t)::type;
    return mma_variant<T, decltype(bt)::value, decltype(g)::value>(variant, a);
  });
}
