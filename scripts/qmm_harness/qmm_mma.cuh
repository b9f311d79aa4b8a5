// Prefill kernel for GPUs without wgmma (sm_80 ... sm_121): a fused affine
// quantized GEMM on mma.sync, out = x * dequant(W)^T.
//
// Layout as qmm_affine.cuh: w [N, K * bits / 32] uint32, scales/biases
// [N, K / group], x [M, K], out [M, N], all row-major.
//
// The MMA's rows are weight rows and its columns rows of x (out^T = W x^T),
// as in qgemv_block: a lane dequantizes its own 16-byte chunk of a weight
// row straight into A fragments, with the K order inside the chunk permuted
// identically for W and x. A block of WN x WM warps computes BN weight rows
// by BM rows of x; x and W tiles of KC columns are staged through STAGES
// shared-memory buffers with cp.async, so that every warp's dequantized
// weights feed R MMAs and every x fragment NT of them. Scales and biases
// are loaded to registers one stage ahead. Blocks run in bands of group_m
// row tiles of x (qmm_mma_group_m), each band sweeping all weight rows, so
// that a band's x stays in L2 however large M is.
#pragma once

#include "qmm_affine.cuh"

namespace mlx::core::cu::qmm_affine {

__device__ __forceinline__ void
cp_async16(void* smem, const void* gmem, bool valid) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  const uint32_t s = static_cast<uint32_t>(__cvta_generic_to_shared(smem));
  // src-size 0 fills the 16 bytes with zeros and reads nothing.
  asm volatile(
      "cp.async.cg.shared.global [%0], [%1], 16, %2;" ::"r"(s),
      "l"(gmem),
      "r"(valid ? 16 : 0));
#endif
}

__device__ __forceinline__ void cp_async_commit() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  asm volatile("cp.async.commit_group;");
#endif
}

template <int N>
__device__ __forceinline__ void cp_async_wait() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  asm volatile("cp.async.wait_group %0;" ::"n"(N));
#endif
}

__device__ __forceinline__ uint4 lds128(const void* p) {
  return *reinterpret_cast<const uint4*>(p);
}
__device__ __forceinline__ uint2 lds64(const void* p) {
  return *reinterpret_cast<const uint2*>(p);
}
__device__ __forceinline__ uint32_t lds32(const void* p) {
  return *reinterpret_cast<const uint32_t*>(p);
}

// Where 16-byte unit u of x's staged row `row` lies in the row. At step j
// lane (g, t) reads word jj = (j + t) % 4 of its weight chunk and the x
// that goes with it: 4-bit unit 4t + jj (16 bytes), 8-bit half jj % 2 of
// unit 2t + jj / 2 (8 bytes). XOR-ing the unit with the row's low bits puts
// a quarter warp's 16-byte (a half warp's 8-byte) loads in distinct banks.
template <int BITS>
__device__ __forceinline__ int qmm_mma_x_unit(int row, int u) {
  return BITS == 4 ? u ^ ((row & 1) << 2) : u ^ (row & 3);
}

// Where 16-byte chunk c of a staged weight row (64 bytes) lies: word jj of
// chunk t for rows g = 0 ... 7 then falls in 32 distinct banks.
__device__ __forceinline__ int qmm_mma_w_chunk(int row, int c) {
  return c ^ ((row >> 1) & 3);
}

template <typename T, int BITS, int WN, int WM, int NT, int R, int STAGES>
struct QmmMmaShape {
  static constexpr int THREADS = WN * WM * 32;
  static constexpr int VALS = 128 / BITS; // K per 16-byte chunk of W
  static constexpr int KC = 4 * VALS; // K per stage: a quad's chunks
  static constexpr int BN = WN * 16 * NT; // weight rows per block
  static constexpr int BM = WM * 8 * R; // rows of x per block
  static constexpr int XUNITS = KC / 8; // 16-byte units of x per row
  static constexpr int XLD = KC; // x row stride in T
  static constexpr int X_BYTES = BM * XLD * int(sizeof(T));
  static constexpr int W_BYTES = BN * 64; // 4 chunks of 16 bytes per row
  static constexpr int STAGE_BYTES = X_BYTES + W_BYTES;
  static constexpr int SMEM = STAGES * STAGE_BYTES;
  static_assert(BM * XUNITS % THREADS == 0 && BN * 4 % THREADS == 0);
};

// Row tiles of x per band: as many as fill half of an L2 of l2_bytes, at
// least one and at most m_tiles.
inline int qmm_mma_group_m(
    int64_t l2_bytes,
    int64_t tile_bytes,
    int64_t m_tiles) {
  int64_t g = l2_bytes / 2 / tile_bytes;
  return int(g < 1 ? 1 : (g > m_tiles ? m_tiles : g));
}

// The first row of x and of W of this block's tile: one grid dimension of
// m_tiles * n_tiles blocks in bands of group_m row tiles of x (fewer in the
// last band), x's tile varying fastest in a band. The block index is read
// with a volatile move so that a second call recomputes the tile instead of
// holding it in registers through the main loop.
template <int BM, int BN>
__device__ __forceinline__ void
qmm_mma_block_tile(int M, int N, int group_m, int64_t& m0, int& n0) {
  uint32_t bid;
  asm volatile("mov.u32 %0, %%ctaid.x;" : "=r"(bid));
  const int m_tiles = (M + BM - 1) / BM;
  const int n_tiles = (N + BN - 1) / BN;
  const int64_t per_band = int64_t(group_m) * n_tiles;
  const int band = int(bid / per_band);
  const int first = band * group_m;
  const int size = min(group_m, m_tiles - first);
  const int local = int(bid - band * per_band);
  m0 = int64_t(first + local % size) * BM;
  n0 = (local / size) * BN;
}

// With GATHER, gather_qmm over indices sorted by expert: block x takes the
// rows of gather_expert_tiles_kernel's tile blockIdx.x (tiles[2i] its first
// row, tiles[2i + 1] its rows, at most BM, all of one expert; rows of the
// products laid end to end as in gathered_x_row), block y its weight rows,
// and w, scales and biases hold the experts ([E, N, ...]); M is the rows
// per product and group_m unused.
template <
    typename T,
    int BITS,
    int GROUP,
    int WN,
    int WM,
    int NT,
    int R,
    int STAGES,
    bool GATHER = false>
__global__ void __launch_bounds__(WN* WM * 32, 1) qmm_mma_kernel(
    const T* __restrict__ x,
    const uint32_t* __restrict__ w,
    const T* __restrict__ scales,
    const T* __restrict__ biases,
    T* __restrict__ out,
    int M,
    int N,
    int K,
    int group_m,
    const uint32_t* __restrict__ lhs_indices,
    const uint32_t* __restrict__ rhs_indices,
    const int64_t* __restrict__ tiles) {
  using S = QmmMmaShape<T, BITS, WN, WM, NT, R, STAGES>;
  using V = typename Vec2<T>::type;
  constexpr int THREADS = S::THREADS, VALS = S::VALS, KC = S::KC;
  constexpr int BN = S::BN, BM = S::BM, XLD = S::XLD;
  constexpr int XUNITS = S::XUNITS;
  constexpr int XLOADS = BM * XUNITS / THREADS;
  constexpr int WLOADS = BN * 4 / THREADS;

  extern __shared__ uint4 qmm_mma_smem[];
  char* smem = reinterpret_cast<char*>(qmm_mma_smem);
  auto xs = [&](int st) {
    return reinterpret_cast<T*>(smem + st * S::STAGE_BYTES);
  };
  auto ws = [&](int st) {
    return smem + st * S::STAGE_BYTES + S::X_BYTES;
  };

  const int lane = threadIdx.x & 31;
  const int warp = threadIdx.x >> 5;
  const int g = lane >> 2;
  const int t = lane & 3;
  const int wn = warp % WN;
  const int wm = warp / WN;
  // The tile: rows m0 ... m0 + rcount - 1 (of x, or of the products' rows
  // laid end to end) by weight rows n0 ... n0 + BN - 1.
  int64_t m0;
  int n0;
  int rcount;
  if constexpr (GATHER) {
    m0 = tiles[2 * blockIdx.x];
    rcount = int(tiles[2 * blockIdx.x + 1]);
    n0 = blockIdx.y * BN;
    if (rcount == 0) {
      return; // a slot past the last of the table's tiles
    }
    const int64_t e = rhs_indices[m0 / M];
    w += e * (int64_t(N) * (K * BITS / 32));
    scales += e * (int64_t(N) * (K / GROUP));
    biases += e * (int64_t(N) * (K / GROUP));
  } else {
    qmm_mma_block_tile<BM, BN>(M, N, group_m, m0, n0);
    rcount = int(min(int64_t(M) - m0, int64_t(BM)));
  }
  const int chunks = (K + KC - 1) / KC;
  const int64_t row_bytes = int64_t(K) * BITS / 8;
  const int groups_per_row = K / GROUP;
  const char* wbytes = reinterpret_cast<const char*>(w);

  // The thread's 16-byte units of a stage: x unit xu of rows xr0 + l * XSTEP,
  // W chunk wc of rows wr0 + l * WSTEP.
  constexpr int XSTEP = THREADS / XUNITS, WSTEP = THREADS / 4;
  static_assert(THREADS % XUNITS == 0);
  const int xu = threadIdx.x % XUNITS, xr0 = threadIdx.x / XUNITS;
  const int wc = threadIdx.x & 3, wr0 = threadIdx.x >> 2;
  // The thread's rows of x: dense, xg + l * XSTEP rows; gathered, xp[l].
  const T* xg = x + (m0 + xr0) * K + xu * 8;
  const T* xp[GATHER ? XLOADS : 1];
  if constexpr (GATHER) {
#pragma unroll
    for (int l = 0; l < XLOADS; ++l) {
      const int i = xr0 + l * XSTEP;
      xp[l] = i < rcount
          ? gathered_x_row(x, lhs_indices, M, K, m0 + i) + xu * 8
          : x;
    }
  }
  const char* wg = wbytes + (n0 + wr0) * row_bytes + wc * 16;
  // Rows left from the thread's first ones (ints, so that m0 and n0 need
  // no registers through the main loop).
  const int x_rows_left = rcount - xr0;
  const int w_rows_left = N - n0 - wr0;
  // Rows a thread stages differ by multiples of 8: one swizzle for all.
  static_assert(XSTEP % 8 == 0 && WSTEP % 8 == 0);
  const int xoff = xr0 * XLD + qmm_mma_x_unit<BITS>(xr0, xu) * 8;
  const int woff = wr0 * 64 + qmm_mma_w_chunk(wr0, wc) * 16;
  auto load_stage = [&](int c, int st) {
    T* xd = xs(st) + xoff;
    const bool xk = c * KC + xu * 8 < K;
#pragma unroll
    for (int l = 0; l < XLOADS; ++l) {
      const bool valid = xk && l * XSTEP < x_rows_left;
      const T* src;
      if constexpr (GATHER) {
        src = xp[l];
      } else {
        src = xg + int64_t(l * XSTEP) * K;
      }
      cp_async16(xd + l * XSTEP * XLD, valid ? src + c * KC : x, valid);
    }
    char* wd = ws(st) + woff;
    const bool wk = c * KC + wc * VALS < K;
#pragma unroll
    for (int l = 0; l < WLOADS; ++l) {
      const bool valid = wk && l * WSTEP < w_rows_left;
      cp_async16(
          wd + l * WSTEP * 64,
          valid ? wg + l * WSTEP * row_bytes + int64_t(c) * 64 : wbytes,
          valid);
    }
  };

  // The lane's weight rows: n0 + wrow + nt * 16 (+ 8).
  const int wrow = wn * 16 * NT + g;
  const T* sg = scales + int64_t(n0 + wrow) * groups_per_row;
  const T* bg = biases + int64_t(n0 + wrow) * groups_per_row;
  const int s_rows_left = N - n0 - wrow;
  auto load_scales = [&](int c, T (&s)[NT][2], T (&b)[NT][2]) {
    const int k = c * KC + t * VALS;
    const int gi = k / GROUP;
#pragma unroll
    for (int nt = 0; nt < NT; ++nt) {
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        const int dn = nt * 16 + 8 * h;
        const bool valid = k < K && dn < s_rows_left;
        s[nt][h] = valid ? sg[dn * groups_per_row + gi] : T(0.f);
        b[nt][h] = valid ? bg[dn * groups_per_row + gi] : T(0.f);
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

#pragma unroll
  for (int st = 0; st < STAGES - 1; ++st) {
    if (st < chunks) {
      load_stage(st, st);
    }
    cp_async_commit();
  }
  T s_cur[NT][2], b_cur[NT][2];
  load_scales(0, s_cur, b_cur);

  const int xrow = wm * 8 * R + g;
#pragma unroll 1
  for (int c = 0; c < chunks; ++c) {
    cp_async_wait<STAGES - 2>();
    __syncthreads();
    // Every warp is past chunk c - 1: its buffer takes chunk c + STAGES - 1.
    if (c + STAGES - 1 < chunks) {
      load_stage(c + STAGES - 1, (c + STAGES - 1) % STAGES);
    }
    cp_async_commit();
    T s_nxt[NT][2], b_nxt[NT][2];
    if (c + 1 < chunks) {
      load_scales(c + 1, s_nxt, b_nxt);
    }

    const int st = c % STAGES;
    const T* xb = xs(st);
    const char* wb = ws(st);
    // The lane's chunk of its first weight row; the others are 8 rows apart
    // (same swizzle).
    const char* wl = wb + wrow * 64 + qmm_mma_w_chunk(g, t) * 16;
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      const int jj = (j + t) & 3;
      if constexpr (BITS == 4) {
        // Word jj of each row: (n0,n4) (n1,n5) (n2,n6) (n3,n7).
        uint32_t fa[NT][2][4];
#pragma unroll
        for (int nt = 0; nt < NT; ++nt) {
#pragma unroll
          for (int h = 0; h < 2; ++h) {
            dequant_word4<T>(
                lds32(wl + (nt * 16 + 8 * h) * 64 + jj * 4),
                V(s_cur[nt][h], s_cur[nt][h]),
                V(b_cur[nt][h], b_cur[nt][h]),
                fa[nt][h]);
          }
        }
        const T* xl = xb + xrow * XLD + qmm_mma_x_unit<4>(g, 4 * t + jj) * 8;
#pragma unroll
        for (int r = 0; r < R; ++r) {
          const uint4 xv = lds128(xl + 8 * r * XLD);
          // (e0..e7) -> B fragments (e0,e4)(e1,e5) and (e2,e6)(e3,e7).
          const uint32_t b00 = prmt(xv.x, xv.z, 0x5410u);
          const uint32_t b01 = prmt(xv.x, xv.z, 0x7632u);
          const uint32_t b10 = prmt(xv.y, xv.w, 0x5410u);
          const uint32_t b11 = prmt(xv.y, xv.w, 0x7632u);
#pragma unroll
          for (int nt = 0; nt < NT; ++nt) {
            const uint32_t a0[4] = {
                fa[nt][0][0], fa[nt][1][0], fa[nt][0][1], fa[nt][1][1]};
            const uint32_t a1[4] = {
                fa[nt][0][2], fa[nt][1][2], fa[nt][0][3], fa[nt][1][3]};
            mma_16816<T>(acc[nt][r], a0, b00, b01);
            mma_16816<T>(acc[nt][r], a1, b10, b11);
          }
        }
      } else {
        // Word jj of each row: (b0,b1) (b2,b3).
        uint32_t fa[NT][2][2];
#pragma unroll
        for (int nt = 0; nt < NT; ++nt) {
#pragma unroll
          for (int h = 0; h < 2; ++h) {
            dequant_word8<T>(
                lds32(wl + (nt * 16 + 8 * h) * 64 + jj * 4),
                float(s_cur[nt][h]),
                float(b_cur[nt][h]),
                fa[nt][h]);
          }
        }
        const T* xl = xb + xrow * XLD +
            qmm_mma_x_unit<8>(g, 2 * t + (jj >> 1)) * 8 + (jj & 1) * 4;
#pragma unroll
        for (int r = 0; r < R; ++r) {
          const uint2 xv = lds64(xl + 8 * r * XLD);
#pragma unroll
          for (int nt = 0; nt < NT; ++nt) {
            const uint32_t a[4] = {
                fa[nt][0][0], fa[nt][1][0], fa[nt][0][1], fa[nt][1][1]};
            mma_16816<T>(acc[nt][r], a, xv.x, xv.y);
          }
        }
      }
    }

#pragma unroll
    for (int nt = 0; nt < NT; ++nt) {
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        s_cur[nt][h] = s_nxt[nt][h];
        b_cur[nt][h] = b_nxt[nt][h];
      }
    }
  }
  cp_async_wait<0>();

  // acc[nt][r]: [0, 1] weight row g, x rows 2t, 2t + 1; [2, 3] row g + 8.
  // The tile again rather than kept in registers through the main loop
  // (volatile: loads here, not the ones above).
  if constexpr (GATHER) {
    m0 = *reinterpret_cast<const volatile int64_t*>(tiles + 2 * blockIdx.x);
    rcount = int(
        *reinterpret_cast<const volatile int64_t*>(tiles + 2 * blockIdx.x + 1));
    n0 = blockIdx.y * BN;
  } else {
    qmm_mma_block_tile<BM, BN>(M, N, group_m, m0, n0);
    rcount = int(min(int64_t(M) - m0, int64_t(BM)));
  }
#pragma unroll
  for (int nt = 0; nt < NT; ++nt) {
#pragma unroll
    for (int r = 0; r < R; ++r) {
#pragma unroll
      for (int i = 0; i < 4; ++i) {
        const int n = n0 + wrow + nt * 16 + (i >> 1) * 8;
        const int row = wm * 8 * R + 8 * r + 2 * t + (i & 1);
        if (n < N && row < rcount) {
          out[(m0 + row) * N + n] = T(acc[nt][r][i]);
        }
      }
    }
  }
}

} // namespace mlx::core::cu::qmm_affine
