// Copyright © 2026 Apple Inc.

// Affine 4/8-bit quantized matmul kernels (transpose=True layout):
//   w: [N, K * bits / 32] uint32, scales/biases: [N, K / group_size] of T,
//   x: [M, K] of T, out[m, n] = sum_k x[m, k] * (scale * q[n, k] + bias).
// Kept free of MLX headers so that a standalone harness can compile the
// same source.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cstdint>
#include <type_traits>

namespace mlx::core::cu::qmm_affine {

template <typename T>
struct Vec2;
template <>
struct Vec2<__nv_bfloat16> {
  using type = __nv_bfloat162;
  // 0x4300 is bf16 128.0: OR-ing a nibble into its mantissa gives 128 + q
  // exactly (bf16 holds every integer up to 256).
  static constexpr uint32_t magic = 0x43004300u;
  static constexpr float magic_value = 128.0f;
  static constexpr uint32_t one2 = 0x3F803F80u; // (1, 1)
  static __device__ __forceinline__ type from_float2(float a, float b) {
    return __floats2bfloat162_rn(a, b);
  }
};
template <>
struct Vec2<__half> {
  using type = __half2;
  // 0x6400 is fp16 1024.0.
  static constexpr uint32_t magic = 0x64006400u;
  static constexpr float magic_value = 1024.0f;
  static constexpr uint32_t one2 = 0x3C003C00u; // (1, 1)
  static __device__ __forceinline__ type from_float2(float a, float b) {
    return __floats2half2_rn(a, b);
  }
};

template <typename V>
__device__ __forceinline__ V as_vec(uint32_t u) {
  return *reinterpret_cast<V*>(&u);
}
template <typename V>
__device__ __forceinline__ uint32_t as_u32(V v) {
  return *reinterpret_cast<uint32_t*>(&v);
}

__device__ __forceinline__ uint32_t prmt(uint32_t a, uint32_t b, uint32_t s) {
  uint32_t r;
  asm("prmt.b32 %0, %1, %2, %3;" : "=r"(r) : "r"(a), "r"(b), "r"(s));
  return r;
}

// Byte i of w as a float: place it under the exponent of 2^23, subtract.
__device__ __forceinline__ float byte_to_float(uint32_t w, int i) {
  uint32_t sel = 0x7650u | uint32_t(i);
  uint32_t f = prmt(w, 0x4B000000u, sel);
  return __uint_as_float(f) - 8388608.0f;
}

// Streaming 16-byte load: the weights are read once, keep them out of L1.
__device__ __forceinline__ uint4 ld_stream(const uint4* p) {
  uint4 r;
  asm volatile("ld.global.nc.L1::no_allocate.v4.u32 {%0,%1,%2,%3}, [%4];"
               : "=r"(r.x), "=r"(r.y), "=r"(r.z), "=r"(r.w)
               : "l"(p));
  return r;
}

// Streaming load of 1, 2 or 4 words.
template <int WORDS>
__device__ __forceinline__ void ld_stream_words(
    const uint32_t* p,
    uint32_t* r) {
  if constexpr (WORDS == 1) {
    asm volatile("ld.global.nc.L1::no_allocate.u32 %0, [%1];"
                 : "=r"(r[0])
                 : "l"(p));
  } else if constexpr (WORDS == 2) {
    asm volatile("ld.global.nc.L1::no_allocate.v2.u32 {%0,%1}, [%2];"
                 : "=r"(r[0]), "=r"(r[1])
                 : "l"(p));
  } else {
    asm volatile("ld.global.nc.L1::no_allocate.v4.u32 {%0,%1,%2,%3}, [%4];"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "l"(p));
  }
}

// (a & 0x000F000F) | c in one LOP3, c in a register.
__device__ __forceinline__ uint32_t nibbles_or(uint32_t a, uint32_t c) {
  uint32_t r;
  asm("lop3.b32 %0, %1, 0x000F000F, %2, 0xea;" : "=r"(r) : "r"(a), "r"(c));
  return r;
}

template <typename T>
__device__ __forceinline__ void
mma_16816(float* d, const uint32_t* a, uint32_t b0, uint32_t b1);

template <>
__device__ __forceinline__ void mma_16816<__nv_bfloat16>(
    float* d,
    const uint32_t* a,
    uint32_t b0,
    uint32_t b1) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ < 800
  // Routing sends no call here below compute capability 8.0.
  __trap();
#else
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 "
      "{%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
#endif
}

template <>
__device__ __forceinline__ void
mma_16816<__half>(float* d, const uint32_t* a, uint32_t b0, uint32_t b1) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ < 800
  // Routing sends no call here below compute capability 8.0.
  __trap();
#else
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 "
      "{%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
#endif
}

// Dequantize the 8 nibbles of one word to four T2 registers holding the
// pairs (n0,n4) (n1,n5) (n2,n6) (n3,n7), each as q * s + b.
template <typename T>
__device__ __forceinline__ void dequant_word4(
    uint32_t w,
    typename Vec2<T>::type s2,
    typename Vec2<T>::type b2,
    uint32_t* out) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ < 800
  // Routing sends no call here below compute capability 8.0.
  __trap();
#else
  using V = typename Vec2<T>::type;
  constexpr uint32_t magic = Vec2<T>::magic;
  const V base = as_vec<V>(magic);
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    uint32_t u = ((w >> (4 * i)) & 0x000F000Fu) | magic;
    V q = __hsub2(as_vec<V>(u), base);
    out[i] = as_u32(__hfma2(q, s2, b2));
  }
#endif
}

// Dequantize the 4 bytes of one word to two T2 registers (b0,b1) (b2,b3).
template <typename T>
__device__ __forceinline__ void
dequant_word8(uint32_t w, float s, float b, uint32_t* out) {
  using V2 = Vec2<T>;
#pragma unroll
  for (int i = 0; i < 2; ++i) {
    float lo = fmaf(byte_to_float(w, 2 * i), s, b);
    float hi = fmaf(byte_to_float(w, 2 * i + 1), s, b);
    out[i] = as_u32(V2::from_float2(lo, hi));
  }
}

// The end of a qgemv block: the WARPS warps' accumulators summed through
// shared memory, warp 0 storing the 16 x 8 tile (acc: [0,1] = W row g, x
// rows 2t, 2t+1; [2,3] = W row g+8).
template <typename T, int WARPS>
__device__ __forceinline__ void qgemv_store(
    float* acc,
    T* __restrict__ out,
    int n0,
    int64_t m0,
    int mcount,
    int N) {
  const int lane = threadIdx.x & 31;
  const int warp = threadIdx.x >> 5;
  const int g = lane >> 2;
  const int t = lane & 3;
  if constexpr (WARPS > 1) {
    __shared__ float red[WARPS - 1][4][32];
    if (warp > 0) {
#pragma unroll
      for (int i = 0; i < 4; ++i) {
        red[warp - 1][i][lane] = acc[i];
      }
    }
    __syncthreads();
    if (warp > 0) {
      return;
    }
#pragma unroll
    for (int wi = 0; wi < WARPS - 1; ++wi) {
#pragma unroll
      for (int i = 0; i < 4; ++i) {
        acc[i] += red[wi][i][lane];
      }
    }
  }
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    int n = n0 + g + (i >> 1) * 8;
    int m = 2 * t + (i & 1);
    if (n < N && m < mcount) {
      out[(m0 + m) * int64_t(N) + n] = T(acc[i]);
    }
  }
}

// Decode GEMV for M <= 8 rows of x per block row: each warp computes a 16 x 8
// tile of out^T = W x^T with mma.sync (rows of W are the MMA's M, rows of x
// its N), streaming 16 bytes of W per lane and row. The K order inside a
// lane's 16-byte chunk is permuted identically for W and x, so no shuffles
// are needed. WARPS warps of a block split K and reduce through shared
// memory; U chunks per lane are loaded before any is used.
//
// gather_qgemv_kernel runs the same block once per product of gather_qmm;
// gather_qgemv_rows_kernel runs its accumulation (qgemv_accumulate) over
// tiles of rows taken across products.
//
// Requirements (checked by the caller): K % 32 == 0, K % group_size == 0,
// 16-byte aligned w and x (every expert's and batch's slice too),
// group_size in {32, 64, 128}.
//
// qgemv_accumulate adds the 16 x 8R tile of weight rows n0 ... n0 + 15
// times R groups of 8 rows of x to acc[r]: group r's row g (the lane's)
// starts at x_rows[r] and is read only where has_x[r] (zeros otherwise).
// Each dequantized weight fragment feeds R MMAs. The warp takes part kw of
// K's WARPS parts (its warp index where the block's warps split K).
template <typename T, int BITS, int GROUP, int WARPS, int U, int R = 1>
__device__ __forceinline__ void qgemv_accumulate(
    const T* const (&x_rows)[R],
    const bool (&has_x)[R],
    const uint32_t* __restrict__ w,
    const T* __restrict__ scales,
    const T* __restrict__ biases,
    int n0,
    int N,
    int K,
    int kw,
    float (&acc)[R][4]) {
  using V = typename Vec2<T>::type;
  constexpr int VALS = 128 / BITS; // values per 16-byte chunk
  constexpr int KB = 4 * VALS; // K covered by one warp step (4 lanes across)
  constexpr int XV = VALS / 8; // 16-byte x loads per chunk
  const int lane = threadIdx.x & 31;
  const int g = lane >> 2; // W row (and +8) / x row of this lane
  const int t = lane & 3; // K sub-chunk of this lane

  const int chunks_per_row = K / VALS;
  const int groups_per_row = K / GROUP;

  const int ra = min(n0 + g, N - 1);
  const int rb = min(n0 + g + 8, N - 1);
  const uint4* wa_ptr =
      reinterpret_cast<const uint4*>(w) + int64_t(ra) * chunks_per_row;
  const uint4* wb_ptr =
      reinterpret_cast<const uint4*>(w) + int64_t(rb) * chunks_per_row;
  const T* sa_ptr = scales + int64_t(ra) * groups_per_row;
  const T* sb_ptr = scales + int64_t(rb) * groups_per_row;
  const T* ba_ptr = biases + int64_t(ra) * groups_per_row;
  const T* bb_ptr = biases + int64_t(rb) * groups_per_row;
  const uint4* x_ptr[R];
#pragma unroll
  for (int r = 0; r < R; ++r) {
    x_ptr[r] = reinterpret_cast<const uint4*>(x_rows[r]);
  }

  for (int kb0 = kw * KB; kb0 < K; kb0 += WARPS * KB * U) {
    uint4 wa[U], wb[U], xv[U][R][XV];
    T sa[U], sb[U], ba[U], bb[U];
#pragma unroll
    for (int u = 0; u < U; ++u) {
      int k = kb0 + u * WARPS * KB + t * VALS;
      bool valid = k < K;
      int c = k / VALS;
      int gi = k / GROUP;
      if (valid) {
        wa[u] = ld_stream(wa_ptr + c);
        wb[u] = ld_stream(wb_ptr + c);
        sa[u] = sa_ptr[gi];
        sb[u] = sb_ptr[gi];
        ba[u] = ba_ptr[gi];
        bb[u] = bb_ptr[gi];
      } else {
        wa[u] = wb[u] = make_uint4(0, 0, 0, 0);
        sa[u] = sb[u] = ba[u] = bb[u] = T(0.f);
      }
#pragma unroll
      for (int r = 0; r < R; ++r) {
#pragma unroll
        for (int j = 0; j < XV; ++j) {
          xv[u][r][j] = (valid && has_x[r]) ? x_ptr[r][c * XV + j]
                                            : make_uint4(0, 0, 0, 0);
        }
      }
    }
#pragma unroll
    for (int u = 0; u < U; ++u) {
      const uint32_t* pa = reinterpret_cast<const uint32_t*>(&wa[u]);
      const uint32_t* pb = reinterpret_cast<const uint32_t*>(&wb[u]);
      if constexpr (BITS == 4) {
        V sa2 = V(sa[u], sa[u]), sb2 = V(sb[u], sb[u]);
        V ba2 = V(ba[u], ba[u]), bb2 = V(bb[u], bb[u]);
#pragma unroll
        for (int j = 0; j < 4; ++j) {
          uint32_t da[4], db[4];
          dequant_word4<T>(pa[j], sa2, ba2, da);
          dequant_word4<T>(pb[j], sb2, bb2, db);
#pragma unroll
          for (int h = 0; h < 2; ++h) {
            // Tile (j, h): slots (8j+2h, 8j+2h+4) and (8j+2h+1, 8j+2h+5).
            uint32_t a[4] = {
                da[2 * h], db[2 * h], da[2 * h + 1], db[2 * h + 1]};
#pragma unroll
            for (int r = 0; r < R; ++r) {
              const uint32_t* px =
                  reinterpret_cast<const uint32_t*>(&xv[u][r][0]);
              uint32_t x0 = px[4 * j + h], x1 = px[4 * j + h + 2];
              uint32_t b0 = prmt(x0, x1, 0x5410u);
              uint32_t b1 = prmt(x0, x1, 0x7632u);
              mma_16816<T>(acc[r], a, b0, b1);
            }
          }
        }
      } else {
        float fsa = float(sa[u]), fsb = float(sb[u]);
        float fba = float(ba[u]), fbb = float(bb[u]);
#pragma unroll
        for (int j = 0; j < 4; ++j) {
          uint32_t da[2], db[2];
          dequant_word8<T>(pa[j], fsa, fba, da);
          dequant_word8<T>(pb[j], fsb, fbb, db);
          uint32_t a[4] = {da[0], db[0], da[1], db[1]};
#pragma unroll
          for (int r = 0; r < R; ++r) {
            const uint32_t* px =
                reinterpret_cast<const uint32_t*>(&xv[u][r][0]);
            mma_16816<T>(acc[r], a, px[2 * j], px[2 * j + 1]);
          }
        }
      }
    }
  }
}

template <typename T, int BITS, int GROUP, int WARPS, int U>
__device__ __forceinline__ void qgemv_block(
    const T* __restrict__ x,
    const uint32_t* __restrict__ w,
    const T* __restrict__ scales,
    const T* __restrict__ biases,
    T* __restrict__ out,
    int M,
    int N,
    int K) {
  const int g = (threadIdx.x & 31) >> 2;
  const int n0 = blockIdx.x * 16;
  const int64_t m0 = int64_t(blockIdx.y) * 8;
  const int mcount = min(8, int(M - m0));
  const bool has_x[1] = {g < mcount};
  const T* const x_rows[1] = {x + (m0 + (has_x[0] ? g : 0)) * int64_t(K)};
  float acc[1][4] = {{0.f, 0.f, 0.f, 0.f}};
  qgemv_accumulate<T, BITS, GROUP, WARPS, U>(
      x_rows, has_x, w, scales, biases, n0, N, K, threadIdx.x >> 5, acc);
  qgemv_store<T, WARPS>(acc[0], out, n0, m0, mcount, N);
}

// 4-bit decode GEMV with the scale and bias out of the inner loop. The four
// lanes of a quad read one quantization group of a weight row per step
// (GROUP / 8 bytes each), so that every MMA sums within one group. The MMA
// multiplies x by the nibbles as OR-ed into the magic constant (magic + q,
// one LOP3 per pair), a second MMA with an all-ones A sums x over the same
// slots, and per group
//   sum_k x_k (s q_k + b) = s sum_k x_k (magic + q_k) + (b - magic s) sum_k x_k
// in fp32 (the magic terms cancel there, costing a few of fp32's bits, not
// T's), with fewer instructions per weight byte than dequantizing first.
// U groups are loaded before any is used. Tiles and requirements are
// qgemv_block's.
template <typename T, int GROUP, int WARPS, int U>
__device__ __forceinline__ void qgemv_block_q4(
    const T* __restrict__ x,
    const uint32_t* __restrict__ w,
    const T* __restrict__ scales,
    const T* __restrict__ biases,
    T* __restrict__ out,
    int M,
    int N,
    int K) {
  constexpr int LW = GROUP / 32; // words per lane, row and group
  constexpr uint32_t magic = Vec2<T>::magic;
  const int lane = threadIdx.x & 31;
  const int warp = threadIdx.x >> 5;
  const int g = lane >> 2;
  const int t = lane & 3;

  const int n0 = blockIdx.x * 16;
  const int64_t m0 = int64_t(blockIdx.y) * 8;
  const int mcount = min(8, int(M - m0));
  const int words_per_row = K / 8;
  const int groups_per_row = K / GROUP;

  const int ra = min(n0 + g, N - 1);
  const int rb = min(n0 + g + 8, N - 1);
  const uint32_t* wa_ptr = w + int64_t(ra) * words_per_row + t * LW;
  const uint32_t* wb_ptr = w + int64_t(rb) * words_per_row + t * LW;
  const T* sa_ptr = scales + int64_t(ra) * groups_per_row;
  const T* sb_ptr = scales + int64_t(rb) * groups_per_row;
  const T* ba_ptr = biases + int64_t(ra) * groups_per_row;
  const T* bb_ptr = biases + int64_t(rb) * groups_per_row;
  const bool has_x = g < mcount;
  const uint4* x_ptr =
      reinterpret_cast<const uint4*>(x + (m0 + (has_x ? g : 0)) * int64_t(K)) +
      t * LW;
  const uint32_t ones[4] = {
      Vec2<T>::one2, Vec2<T>::one2, Vec2<T>::one2, Vec2<T>::one2};

  float acc[4] = {0.f, 0.f, 0.f, 0.f};
  const uint32_t mg = magic; // in a register: one LOP3 does (w & m) | mg

  // Warp w takes the U consecutive groups from (i * WARPS + w) * U, so that
  // it reads U * GROUP / 2 contiguous bytes of each row; a last step with
  // fewer groups checks each one.
  auto step = [&](int gb, auto checked) {
    constexpr bool chk = decltype(checked)::value;
    // Step base pointers, so that each group's loads take an immediate
    // offset.
    const uint32_t* pwa = wa_ptr + gb * (GROUP / 8);
    const uint32_t* pwb = wb_ptr + gb * (GROUP / 8);
    const T* psa = sa_ptr + gb;
    const T* psb = sb_ptr + gb;
    const T* pba = ba_ptr + gb;
    const T* pbb = bb_ptr + gb;
    const uint4* px = x_ptr + gb * (GROUP / 8);
    uint32_t wa[U][LW], wb[U][LW];
    T sa[U], sb[U], ba[U], bb[U];
#pragma unroll
    for (int u = 0; u < U; ++u) {
      if (!chk || gb + u < groups_per_row) {
        ld_stream_words<LW>(pwa + u * (GROUP / 8), wa[u]);
        ld_stream_words<LW>(pwb + u * (GROUP / 8), wb[u]);
        sa[u] = psa[u];
        sb[u] = psb[u];
        ba[u] = pba[u];
        bb[u] = pbb[u];
      } else {
#pragma unroll
        for (int j = 0; j < LW; ++j) {
          wa[u][j] = wb[u][j] = 0;
        }
        sa[u] = sb[u] = ba[u] = bb[u] = T(0.f);
      }
    }
    auto load_x = [&](int u, uint4* xv) {
      bool valid = has_x && (!chk || gb + u < groups_per_row);
#pragma unroll
      for (int j = 0; j < LW; ++j) {
        xv[j] = valid ? px[u * (GROUP / 8) + j] : make_uint4(0, 0, 0, 0);
      }
    };
    uint4 xv[2][LW];
    load_x(0, xv[0]);
#pragma unroll
    for (int u = 0; u < U; ++u) {
      if (u + 1 < U) {
        load_x(u + 1, xv[(u + 1) & 1]);
      }
      float part[4] = {0.f, 0.f, 0.f, 0.f};
      float xsum[4] = {0.f, 0.f, 0.f, 0.f};
#pragma unroll
      for (int j = 0; j < LW; ++j) {
        const uint32_t* xw = reinterpret_cast<const uint32_t*>(&xv[u & 1][j]);
        uint32_t da[4], db[4];
#pragma unroll
        for (int i = 0; i < 4; ++i) {
          da[i] = nibbles_or(wa[u][j] >> (4 * i), mg);
          db[i] = nibbles_or(wb[u][j] >> (4 * i), mg);
        }
#pragma unroll
        for (int h = 0; h < 2; ++h) {
          uint32_t a[4] = {da[2 * h], db[2 * h], da[2 * h + 1], db[2 * h + 1]};
          uint32_t b0 = prmt(xw[h], xw[h + 2], 0x5410u);
          uint32_t b1 = prmt(xw[h], xw[h + 2], 0x7632u);
          mma_16816<T>(part, a, b0, b1);
          mma_16816<T>(xsum, ones, b0, b1);
        }
      }
      float fsa = float(sa[u]), fsb = float(sb[u]);
      float fba = fmaf(-Vec2<T>::magic_value, fsa, float(ba[u]));
      float fbb = fmaf(-Vec2<T>::magic_value, fsb, float(bb[u]));
      acc[0] = fmaf(fsa, part[0], fmaf(fba, xsum[0], acc[0]));
      acc[1] = fmaf(fsa, part[1], fmaf(fba, xsum[1], acc[1]));
      acc[2] = fmaf(fsb, part[2], fmaf(fbb, xsum[2], acc[2]));
      acc[3] = fmaf(fsb, part[3], fmaf(fbb, xsum[3], acc[3]));
    }
  };
  int gb = warp * U;
  for (; gb + U <= groups_per_row; gb += WARPS * U) {
    step(gb, std::false_type{});
  }
  if (gb < groups_per_row) {
    step(gb, std::true_type{});
  }

  qgemv_store<T, WARPS>(acc, out, n0, m0, mcount, N);
}

template <typename T, int BITS, int GROUP, int WARPS, int U>
__global__ void __launch_bounds__(WARPS * 32) qgemv_kernel(
    const T* __restrict__ x,
    const uint32_t* __restrict__ w,
    const T* __restrict__ scales,
    const T* __restrict__ biases,
    T* __restrict__ out,
    int M,
    int N,
    int K) {
  qgemv_block<T, BITS, GROUP, WARPS, U>(x, w, scales, biases, out, M, N, K);
}

// Dense 4-bit calls: qgemv_block_q4 with 2 KB of weights per warp and step,
// as qgemv_block's U = 2. Minimum blocks of 1 in the launch bounds leaves
// ptxas the registers to issue a step's loads before its first MMA.
template <typename T, int GROUP, int WARPS>
__global__ void __launch_bounds__(WARPS * 32, 1) qgemv_q4_kernel(
    const T* __restrict__ x,
    const uint32_t* __restrict__ w,
    const T* __restrict__ scales,
    const T* __restrict__ biases,
    T* __restrict__ out,
    int M,
    int N,
    int K) {
  qgemv_block_q4<T, GROUP, WARPS, 256 / GROUP>(
      x, w, scales, biases, out, M, N, K);
}

// gather_qmm: product b = blockIdx.z multiplies the M rows of x's batch
// lhs_indices[b] by the weights, scales and biases of expert rhs_indices[b]
// (w: [E, N, K * bits / 32]) into out's batch b. A kernel of its own:
// dense decode calls ran slower with the index loads inside their kernel.
template <typename T, int BITS, int GROUP, int WARPS, int U>
__global__ void __launch_bounds__(WARPS * 32) gather_qgemv_kernel(
    const T* __restrict__ x,
    const uint32_t* __restrict__ w,
    const T* __restrict__ scales,
    const T* __restrict__ biases,
    T* __restrict__ out,
    const uint32_t* __restrict__ lhs_indices,
    const uint32_t* __restrict__ rhs_indices,
    int M,
    int N,
    int K) {
  const int64_t b = blockIdx.z;
  const int64_t e = rhs_indices[b];
  const int64_t words = int64_t(N) * (K * BITS / 32);
  const int64_t groups = int64_t(N) * (K / GROUP);
  qgemv_block<T, BITS, GROUP, WARPS, U>(
      x + int64_t(lhs_indices[b]) * M * K,
      w + e * words,
      scales + e * groups,
      biases + e * groups,
      out + b * M * N,
      M,
      N,
      K);
}

// Tiles of rows across products (gather_qgemv_rows_kernel,
// gather_qmm_tiles_kernel) lay the products' M rows end to end: row `row`
// there is row m = row % M of product p = row / M, which is row
// lhs_indices[p] * M + m of x.
template <typename T>
__device__ __forceinline__ const T* gathered_x_row(
    const T* x,
    const uint32_t* lhs_indices,
    int M,
    int K,
    int64_t row) {
  return x + (int64_t(lhs_indices[row / M]) * M + row % M) * K;
}

// Threads 0 ... ROWS - 1 write the expert of the tile's row r0 + i into
// expert[i] (0 past the tile's rcount rows).
template <int ROWS>
__device__ __forceinline__ void load_tile_experts(
    uint32_t* expert,
    const uint32_t* rhs_indices,
    int64_t r0,
    int rcount,
    int M) {
  if (threadIdx.x < ROWS) {
    expert[threadIdx.x] =
        threadIdx.x < rcount ? rhs_indices[(r0 + threadIdx.x) / M] : 0;
  }
}

// Stores one 16 x 8 MMA accumulator tile of a tile's pass: weight rows
// n0 + g and n0 + g + 8 of the tile's rows m0 + 2t and m0 + 2t + 1, where
// bit m of `mine` marks row m as the pass's expert's.
template <typename T, typename Mask>
__device__ __forceinline__ void store_tile_rows(
    const float* acc,
    T* __restrict__ out,
    int64_t r0,
    int n0,
    int m0,
    Mask mine,
    int N) {
  const int g = (threadIdx.x & 31) >> 2;
  const int t = threadIdx.x & 3;
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    const int n = n0 + g + (i >> 1) * 8;
    const int m = m0 + 2 * t + (i & 1);
    if (n < N && ((mine >> m) & 1)) {
      out[(r0 + m) * int64_t(N) + n] = T(acc[i]);
    }
  }
}

// gather_qmm over many products of few rows, as mlx-lm's sorted layout calls
// it (one row per product, experts ascending): the products' M rows are laid
// end to end, block x takes the 8R rows from 8R * blockIdx.x and each of
// its WARPS warps 16 weight rows, all of K, from 16 * WARPS * blockIdx.y:
// the warps read the same rows of x, which a tile of many rows makes the
// larger operand, once from memory and then from L1. The tile runs
// qgemv_accumulate once per distinct expert among its rows, with only that
// expert's rows of x, so rows of one expert share its weight loads: sorted
// indices cost one pass per tile (two where an expert's rows end inside
// it), any order at most 8R.
template <typename T, int BITS, int GROUP, int WARPS, int U, int R>
__global__ void __launch_bounds__(WARPS * 32) gather_qgemv_rows_kernel(
    const T* __restrict__ x,
    const uint32_t* __restrict__ w,
    const T* __restrict__ scales,
    const T* __restrict__ biases,
    T* __restrict__ out,
    const uint32_t* __restrict__ lhs_indices,
    const uint32_t* __restrict__ rhs_indices,
    int M,
    int N,
    int K,
    int64_t rows) {
  constexpr int ROWS = 8 * R;
  constexpr uint32_t ALL = (1u << ROWS) - 1u;
  const int lane = threadIdx.x & 31;
  const int warp = threadIdx.x >> 5;
  const int g = lane >> 2;
  const int n0 = (blockIdx.y * WARPS + warp) * 16;
  const int64_t r0 = int64_t(blockIdx.x) * ROWS;
  const int rcount = int(min(int64_t(ROWS), rows - r0));
  const int64_t words = int64_t(N) * (K * BITS / 32);
  const int64_t groups = int64_t(N) * (K / GROUP);

  __shared__ uint32_t expert[ROWS];
  load_tile_experts<ROWS>(expert, rhs_indices, r0, rcount, M);
  // The lane's rows of x.
  const T* x_rows[R];
#pragma unroll
  for (int r = 0; r < R; ++r) {
    x_rows[r] =
        gathered_x_row(x, lhs_indices, M, K, r0 + min(g + 8 * r, rcount - 1));
  }
  __syncthreads();
  if (n0 >= N) {
    return;
  }

  // Bit i set once row i is stored (rows past the end count as stored).
  uint32_t done = ALL & ~((1u << rcount) - 1u);
  while (done != ALL) {
    const uint32_t e = expert[__ffs(~done) - 1];
    uint32_t mine = 0;
#pragma unroll
    for (int i = 0; i < ROWS; ++i) {
      mine |= uint32_t(!((done >> i) & 1u) && expert[i] == e) << i;
    }
    done |= mine;
    bool has_x[R];
    float acc[R][4];
#pragma unroll
    for (int r = 0; r < R; ++r) {
      has_x[r] = (mine >> (g + 8 * r)) & 1u;
#pragma unroll
      for (int i = 0; i < 4; ++i) {
        acc[r][i] = 0.f;
      }
    }
    qgemv_accumulate<T, BITS, GROUP, 1, U, R>(
        x_rows,
        has_x,
        w + e * words,
        scales + e * groups,
        biases + e * groups,
        n0,
        N,
        K,
        0,
        acc);
#pragma unroll
    for (int r = 0; r < R; ++r) {
      store_tile_rows(acc[r], out, r0, n0, 8 * r, mine, N);
    }
  }
}

// Tiles of at most ROWS rows that never hold rows of two experts, for
// gather_qmm_tiles_kernel over indices sorted by expert (mlx-lm's prefill
// layout): a tile that straddles experts runs once for each, dequantizing
// all of its weights each time, which at a few dozen rows per expert is
// most of the work. Expert e's rows (its products, found by binary search)
// get ceil(rows / ROWS) tiles, consecutive, in expert order; tiles[2i] is
// tile i's first row and tiles[2i + 1] its rows, 0 in the slots past the
// last tile up to `capacity` (ceil(all rows / ROWS) + experts suffices).
// One block of 1024 threads.
template <int ROWS>
__global__ void __launch_bounds__(1024) gather_expert_tiles_kernel(
    const uint32_t* __restrict__ rhs_indices,
    int64_t products,
    int M,
    int experts,
    int64_t* __restrict__ tiles,
    int64_t capacity) {
  __shared__ int64_t warp_sums[32];
  const int lane = threadIdx.x & 31;
  const int warp = threadIdx.x >> 5;
  auto first_product = [&](uint32_t e) {
    int64_t lo = 0, hi = products;
    while (lo < hi) {
      const int64_t mid = (lo + hi) / 2;
      if (rhs_indices[mid] < e) {
        lo = mid + 1;
      } else {
        hi = mid;
      }
    }
    return lo;
  };
  int64_t carry = 0; // tiles of the experts before this round's
  for (int e0 = 0; e0 < experts; e0 += 1024) {
    const int e = e0 + threadIdx.x;
    int64_t first = 0, count = 0;
    if (e < experts) {
      first = first_product(e) * M;
      count = first_product(e + 1) * M - first;
    }
    const int64_t n = (count + ROWS - 1) / ROWS;
    // Inclusive sum of n over the block: within warps, then of warp sums.
    int64_t sum = n;
#pragma unroll
    for (int d = 1; d < 32; d <<= 1) {
      const int64_t v = __shfl_up_sync(0xffffffffu, sum, d);
      sum += lane >= d ? v : 0;
    }
    if (lane == 31) {
      warp_sums[warp] = sum;
    }
    __syncthreads();
    if (warp == 0) {
      int64_t ws = warp_sums[lane];
#pragma unroll
      for (int d = 1; d < 32; d <<= 1) {
        const int64_t v = __shfl_up_sync(0xffffffffu, ws, d);
        ws += lane >= d ? v : 0;
      }
      warp_sums[lane] = ws;
    }
    __syncthreads();
    const int64_t tile = carry + (warp ? warp_sums[warp - 1] : 0) + sum - n;
    for (int64_t j = 0; j < n; ++j) {
      tiles[2 * (tile + j)] = first + j * ROWS;
      tiles[2 * (tile + j) + 1] = min(int64_t(ROWS), count - j * ROWS);
    }
    carry += warp_sums[31];
    __syncthreads();
  }
  for (int64_t i = carry + threadIdx.x; i < capacity; i += 1024) {
    tiles[2 * i] = 0;
    tiles[2 * i + 1] = 0;
  }
}

// gather_qmm_tiles_kernel: gather_qmm over tiles of many rows per expert,
// as mlx-lm's sorted layout gives them at prefill chunks (one row per
// product, a hundred or more rows per expert). gather_qgemv_rows_kernel's
// warps each read the tile's rows of x from L1 and dequantize their weights
// for 16 rows; here the block stages 8R rows of x through shared memory in
// chunks of KC columns (double-buffered, one barrier per chunk), so that a
// warp's dequantized weights feed R MMAs and its x fragments NT tiles of 16
// weight rows. 4-bit x is stored with each 16-byte unit's halves in the
// MMA's B order (one PRMT per word, once per block, instead of per warp and
// MMA), and units are XOR-swizzled so that a quarter warp's 16-byte loads
// hit distinct banks. As in gather_qgemv_rows_kernel, a tile runs once per
// distinct expert among its rows (groups of 8 rows without the expert's
// rows skip their MMAs) and stores only that expert's rows. With TABLE,
// block x takes the rows that tiles[2x] and tiles[2x + 1] give instead
// (gather_expert_tiles_kernel's table: one expert's rows, one pass).
//
// Requirements: as qgemv_accumulate's; dynamic shared memory of
// gather_qmm_tiles_smem<T, R, KC>() bytes.
template <typename T, int R, int KC>
constexpr int gather_qmm_tiles_smem() {
  return 2 * 8 * R * (KC + 8) * int(sizeof(T));
}

template <int BITS>
__device__ __forceinline__ int tiles_swizzle(int u) {
  // 4-bit: a quad's lanes read units 4t + j (t = 0..3) of a row: flip bit 1
  // for t >= 2 so that the four fall into distinct banks.
  return BITS == 4 ? u ^ (((u >> 3) & 1) << 1) : u;
}

template <
    typename T,
    int BITS,
    int GROUP,
    int WARPS,
    int R,
    int NT,
    int KC,
    bool TABLE>
__global__ void __launch_bounds__(WARPS * 32) gather_qmm_tiles_kernel(
    const T* __restrict__ x,
    const uint32_t* __restrict__ w,
    const T* __restrict__ scales,
    const T* __restrict__ biases,
    T* __restrict__ out,
    const uint32_t* __restrict__ lhs_indices,
    const uint32_t* __restrict__ rhs_indices,
    const int64_t* __restrict__ tiles,
    int M,
    int N,
    int K,
    int64_t rows) {
  using V = typename Vec2<T>::type;
  constexpr int ROWS = 8 * R;
  constexpr int THREADS = WARPS * 32;
  constexpr int VALS = 128 / BITS; // K values per 16-byte chunk of W
  constexpr int KB = 4 * VALS; // K per warp step (a quad across)
  constexpr int STEPS = KC / KB;
  constexpr int UNITS = KC / 8; // 16-byte units of x per row and chunk
  constexpr int LD = KC + 8; // row stride in T: one unit of padding
  constexpr int LOADS = ROWS * UNITS / THREADS;
  static_assert(ROWS <= 64 && KC % KB == 0 && (BITS == 8 || UNITS % 16 == 0));
  static_assert(ROWS * UNITS % THREADS == 0);

  extern __shared__ uint4 tiles_smem[];
  T* xs = reinterpret_cast<T*>(tiles_smem);
  __shared__ uint32_t expert[ROWS];

  const int lane = threadIdx.x & 31;
  const int warp = threadIdx.x >> 5;
  const int g = lane >> 2;
  const int t = lane & 3;
  const int n0 = (blockIdx.y * WARPS + warp) * 16 * NT;
  const bool has_n = n0 < N; // warp-uniform; such warps still stage x
  const int64_t r0 = TABLE ? tiles[2 * blockIdx.x] : int64_t(blockIdx.x) * ROWS;
  const int rcount = TABLE ? int(tiles[2 * blockIdx.x + 1])
                           : int(min(int64_t(ROWS), rows - r0));
  if (rcount == 0) {
    return; // a slot past the last of gather_expert_tiles_kernel's tiles
  }
  const int64_t words = int64_t(N) * (K * BITS / 32);
  const int64_t groups = int64_t(N) * (K / GROUP);
  const int chunks_per_row = K / VALS;
  const int groups_per_row = K / GROUP;
  const int chunks = (K + KC - 1) / KC;

  load_tile_experts<ROWS>(expert, rhs_indices, r0, rcount, M);
  // The thread's units of x to stage.
  const T* xsrc[LOADS];
  int xdst[LOADS], xcol[LOADS];
#pragma unroll
  for (int l = 0; l < LOADS; ++l) {
    const int i = threadIdx.x + l * THREADS;
    const int row = i / UNITS, u = i % UNITS;
    xsrc[l] = gathered_x_row(x, lhs_indices, M, K, r0 + min(row, rcount - 1));
    xcol[l] = u * 8;
    xdst[l] = row * LD + tiles_swizzle<BITS>(u) * 8;
  }
  __syncthreads();

  auto load_x = [&](int c, uint4 (&v)[LOADS]) {
#pragma unroll
    for (int l = 0; l < LOADS; ++l) {
      const int k = c * KC + xcol[l];
      v[l] = k < K ? *reinterpret_cast<const uint4*>(xsrc[l] + k)
                   : make_uint4(0, 0, 0, 0);
    }
  };
  auto store_x = [&](int buf, const uint4 (&v)[LOADS]) {
#pragma unroll
    for (int l = 0; l < LOADS; ++l) {
      uint4 o = v[l];
      if constexpr (BITS == 4) {
        // Halves (e0..e7) -> (e0,e4) (e1,e5) (e2,e6) (e3,e7): the B
        // fragments of the unit's two MMAs, in the order dequant_word4
        // gives W.
        o = make_uint4(
            prmt(v[l].x, v[l].z, 0x5410u),
            prmt(v[l].x, v[l].z, 0x7632u),
            prmt(v[l].y, v[l].w, 0x5410u),
            prmt(v[l].y, v[l].w, 0x7632u));
      }
      *reinterpret_cast<uint4*>(xs + buf * ROWS * LD + xdst[l]) = o;
    }
  };

  // Bit i set once row i is stored (rows past the end count as stored).
  const uint64_t all = ROWS == 64 ? ~0ull : (1ull << ROWS) - 1;
  uint64_t done = rcount == 64 ? 0 : all & ~((1ull << rcount) - 1);
  while (done != all) {
    const uint32_t e = expert[__ffsll(~done) - 1];
    uint64_t mine = 0;
#pragma unroll
    for (int h = 0; h < ROWS; h += 32) {
      const int i = h + lane;
      const bool in = i < ROWS && !((done >> i) & 1) && expert[i] == e;
      mine |= uint64_t(__ballot_sync(0xffffffffu, in)) << h;
    }
    done |= mine;

    const uint4* wa_ptr[NT];
    const uint4* wb_ptr[NT];
    const T* sa_ptr[NT];
    const T* sb_ptr[NT];
    const T* ba_ptr[NT];
    const T* bb_ptr[NT];
#pragma unroll
    for (int nt = 0; nt < NT; ++nt) {
      const int ra = min(n0 + nt * 16 + g, N - 1);
      const int rb = min(n0 + nt * 16 + g + 8, N - 1);
      wa_ptr[nt] = reinterpret_cast<const uint4*>(w + e * words) +
          int64_t(ra) * chunks_per_row;
      wb_ptr[nt] = reinterpret_cast<const uint4*>(w + e * words) +
          int64_t(rb) * chunks_per_row;
      sa_ptr[nt] = scales + e * groups + int64_t(ra) * groups_per_row;
      sb_ptr[nt] = scales + e * groups + int64_t(rb) * groups_per_row;
      ba_ptr[nt] = biases + e * groups + int64_t(ra) * groups_per_row;
      bb_ptr[nt] = biases + e * groups + int64_t(rb) * groups_per_row;
    }
    uint4 wa[NT][STEPS], wb[NT][STEPS];
    T sa[NT][STEPS], sb[NT][STEPS], ba[NT][STEPS], bb[NT][STEPS];
    auto load_w = [&](int c) {
#pragma unroll
      for (int nt = 0; nt < NT; ++nt) {
#pragma unroll
        for (int s = 0; s < STEPS; ++s) {
          const int k = c * KC + s * KB + t * VALS;
          if (has_n && k < K) {
            wa[nt][s] = ld_stream(wa_ptr[nt] + k / VALS);
            wb[nt][s] = ld_stream(wb_ptr[nt] + k / VALS);
            sa[nt][s] = sa_ptr[nt][k / GROUP];
            sb[nt][s] = sb_ptr[nt][k / GROUP];
            ba[nt][s] = ba_ptr[nt][k / GROUP];
            bb[nt][s] = bb_ptr[nt][k / GROUP];
          } else {
            wa[nt][s] = wb[nt][s] = make_uint4(0, 0, 0, 0);
            sa[nt][s] = sb[nt][s] = ba[nt][s] = bb[nt][s] = T(0.f);
          }
        }
      }
    };

    float acc[NT][R][4];
#pragma unroll
    for (int nt = 0; nt < NT; ++nt) {
#pragma unroll
      for (int r = 0; r < R; ++r) {
#pragma unroll
        for (int i = 0; i < 4; ++i) {
          acc[nt][r][i] = 0.f;
        }
      }
    }
    uint4 xn[LOADS];
    load_x(0, xn);
    store_x(0, xn);
    load_w(0);
    __syncthreads();
    for (int c = 0; c < chunks; ++c) {
      const T* xb = xs + (c & 1) * ROWS * LD;
      if (c + 1 < chunks) {
        load_x(c + 1, xn);
      }
      // This chunk's weights; the next chunk's are loaded after them.
      uint4 ca[NT][STEPS], cb[NT][STEPS];
      T csa[NT][STEPS], csb[NT][STEPS], cba[NT][STEPS], cbb[NT][STEPS];
#pragma unroll
      for (int nt = 0; nt < NT; ++nt) {
#pragma unroll
        for (int s = 0; s < STEPS; ++s) {
          ca[nt][s] = wa[nt][s];
          cb[nt][s] = wb[nt][s];
          csa[nt][s] = sa[nt][s];
          csb[nt][s] = sb[nt][s];
          cba[nt][s] = ba[nt][s];
          cbb[nt][s] = bb[nt][s];
        }
      }
      if (c + 1 < chunks) {
        load_w(c + 1);
      }
      if (has_n) {
#pragma unroll
        for (int s = 0; s < STEPS; ++s) {
#pragma unroll
          for (int j = 0; j < 4; ++j) {
            // The A fragments of weight word j of each 16-row tile: 4-bit
            // two MMAs ([0, 1] and [2, 3]), 8-bit one.
            uint32_t fa[NT][4], fb[NT][4];
#pragma unroll
            for (int nt = 0; nt < NT; ++nt) {
              const uint32_t pa =
                  reinterpret_cast<const uint32_t*>(&ca[nt][s])[j];
              const uint32_t pb =
                  reinterpret_cast<const uint32_t*>(&cb[nt][s])[j];
              if constexpr (BITS == 4) {
                dequant_word4<T>(
                    pa,
                    V(csa[nt][s], csa[nt][s]),
                    V(cba[nt][s], cba[nt][s]),
                    fa[nt]);
                dequant_word4<T>(
                    pb,
                    V(csb[nt][s], csb[nt][s]),
                    V(cbb[nt][s], cbb[nt][s]),
                    fb[nt]);
              } else {
                dequant_word8<T>(
                    pa, float(csa[nt][s]), float(cba[nt][s]), fa[nt]);
                dequant_word8<T>(
                    pb, float(csb[nt][s]), float(cbb[nt][s]), fb[nt]);
              }
            }
            // The lane's unit of x for word j: 4-bit unit 4t + j of the
            // step, 8-bit unit 2t + j / 2 (words 2j, 2j + 1 of its chunk).
            const int u =
                BITS == 4 ? s * 16 + 4 * t + j : s * 8 + 2 * t + (j >> 1);
            const T* xrow = xb + g * LD + tiles_swizzle<BITS>(u) * 8;
#pragma unroll
            for (int r = 0; r < R; ++r) {
              if (!((mine >> (8 * r)) & 0xffu)) {
                continue;
              }
              const uint4 xv =
                  *reinterpret_cast<const uint4*>(xrow + 8 * r * LD);
#pragma unroll
              for (int nt = 0; nt < NT; ++nt) {
                if constexpr (BITS == 4) {
                  uint32_t a0[4] = {fa[nt][0], fb[nt][0], fa[nt][1], fb[nt][1]};
                  uint32_t a1[4] = {fa[nt][2], fb[nt][2], fa[nt][3], fb[nt][3]};
                  mma_16816<T>(acc[nt][r], a0, xv.x, xv.y);
                  mma_16816<T>(acc[nt][r], a1, xv.z, xv.w);
                } else {
                  uint32_t a[4] = {fa[nt][0], fb[nt][0], fa[nt][1], fb[nt][1]};
                  mma_16816<T>(
                      acc[nt][r],
                      a,
                      (j & 1) ? xv.z : xv.x,
                      (j & 1) ? xv.w : xv.y);
                }
              }
            }
          }
        }
      }
      if (c + 1 < chunks) {
        store_x((c + 1) & 1, xn);
      }
      __syncthreads();
    }

    if (has_n) {
      // The table's first row again rather than kept in registers through
      // the pass (volatile: a load here, not the one above).
      int64_t rs = r0;
      if constexpr (TABLE) {
        rs = *reinterpret_cast<const volatile int64_t*>(tiles + 2 * blockIdx.x);
      }
#pragma unroll
      for (int nt = 0; nt < NT; ++nt) {
#pragma unroll
        for (int r = 0; r < R; ++r) {
          store_tile_rows(acc[nt][r], out, rs, n0 + nt * 16, 8 * r, mine, N);
        }
      }
    }
  }
}

// Dequantize W to a dense [N, K] matrix of T, for the prefill path that
// hands the product to cuBLAS. One 32-bit word of W per thread and step, so
// that a warp reads 128 contiguous bytes and writes 512 (4-bit) or 256
// (8-bit) contiguous bytes; UNROLL words are loaded before any is used.
// Groups never straddle rows (K % GROUP == 0), so W, the scales and the
// output are indexed as flat arrays.
template <typename T, int BITS, int GROUP, int UNROLL = 4>
__global__ void __launch_bounds__(256) dequant_kernel(
    const uint32_t* __restrict__ w,
    const T* __restrict__ scales,
    const T* __restrict__ biases,
    T* __restrict__ out,
    int64_t words) {
  using V = typename Vec2<T>::type;
  constexpr int VALS = 32 / BITS;
  const int64_t stride = int64_t(gridDim.x) * blockDim.x * UNROLL;
  for (int64_t i0 = int64_t(blockIdx.x) * blockDim.x * UNROLL + threadIdx.x;
       i0 < words;
       i0 += stride) {
    uint32_t wv[UNROLL];
    T s[UNROLL], b[UNROLL];
#pragma unroll
    for (int u = 0; u < UNROLL; ++u) {
      int64_t i = i0 + int64_t(u) * blockDim.x;
      if (i < words) {
        wv[u] = __ldg(w + i);
        int64_t g = i * VALS / GROUP;
        s[u] = scales[g];
        b[u] = biases[g];
      }
    }
#pragma unroll
    for (int u = 0; u < UNROLL; ++u) {
      int64_t i = i0 + int64_t(u) * blockDim.x;
      if (i >= words) {
        continue;
      }
      if constexpr (BITS == 4) {
        uint32_t d[4];
        dequant_word4<T>(wv[u], V(s[u], s[u]), V(b[u], b[u]), d);
        // d holds (n0,n4) (n1,n5) (n2,n6) (n3,n7): restore K order.
        uint4 o;
        o.x = prmt(d[0], d[1], 0x5410u);
        o.y = prmt(d[2], d[3], 0x5410u);
        o.z = prmt(d[0], d[1], 0x7632u);
        o.w = prmt(d[2], d[3], 0x7632u);
        reinterpret_cast<uint4*>(out)[i] = o;
      } else {
        uint2 o;
        dequant_word8<T>(
            wv[u], float(s[u]), float(b[u]), reinterpret_cast<uint32_t*>(&o));
        reinterpret_cast<uint2*>(out)[i] = o;
      }
    }
  }
}

} // namespace mlx::core::cu::qmm_affine
