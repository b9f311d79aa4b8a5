// Standalone harness for MLX's tiled CUDA attention kernel.
//
// Compiles the kernel header from a patched MLX tree (-I <mlx-root>) into a
// small shared library with a C entry point, so a Python driver can hand it
// device pointers from PyTorch tensors and check it against a reference in
// seconds instead of rebuilding MLX. Nothing here re-implements the kernel:
// it only instantiates and launches what the patch adds.

#include "mlx/backend/cuda/device/attention_decode.cuh"
#include "mlx/backend/cuda/device/attention_tile_size.cuh"

#include <cuda.h>
#include <cuda_runtime.h>

#include <cstdio>
#include <type_traits>

namespace attn = mlx::core::cu::attention;

namespace {

enum DtypeCode { kFloat16 = 0, kBFloat16 = 1 };

// Split-head-dim wgmma blocks load Q, K and V through TMA maps. MLX's
// launcher calls cuTensorMapEncodeTiled; the harness does not link the
// driver and asks the runtime for the same entry point.
using EncodeTiled = CUresult (*)(CUtensorMap*, CUtensorMapDataType, cuuint32_t,
                                 void*, const cuuint64_t*, const cuuint64_t*,
                                 const cuuint32_t*, const cuuint32_t*,
                                 CUtensorMapInterleave, CUtensorMapSwizzle,
                                 CUtensorMapL2promotion,
                                 CUtensorMapFloatOOBfill);

// The CUDA version that introduced cuTensorMapEncodeTiled.
constexpr unsigned kEncodeTiledVersion = 12000;

EncodeTiled encode_tiled() {
  static EncodeTiled fn = [] {
    void* f = nullptr;
    cudaDriverEntryPointQueryResult found;
    if (cudaGetDriverEntryPointByVersion("cuTensorMapEncodeTiled", &f,
                                         kEncodeTiledVersion,
                                         cudaEnableDefault,
                                         &found) != cudaSuccess ||
        found != cudaDriverEntryPointSuccess) {
      return static_cast<EncodeTiled>(nullptr);
    }
    return reinterpret_cast<EncodeTiled>(f);
  }();
  return fn;
}

template <typename Traits, typename T>
int encode_maps(const void* q, const void* k, const void* v,
                attn::TiledParams& p) {
  EncodeTiled encode = encode_tiled();
  if (!encode) {
    std::fprintf(stderr, "cuTensorMapEncodeTiled not found\n");
    return 6;
  }
  CUtensorMapDataType type = std::is_same_v<T, __half>
      ? CU_TENSOR_MAP_DATA_TYPE_FLOAT16
      : CU_TENSOR_MAP_DATA_TYPE_BFLOAT16;
  CUresult r = attn::encode_tiled_maps<Traits>(encode, p, type, q, k, v);
  if (r != CUDA_SUCCESS) {
    std::fprintf(stderr, "tensor map encoding failed: %d\n", r);
    return 7;
  }
  return 0;
}

// For an array mask, MLX's launcher first builds the tile liveness map with
// kernel_mask_tile_liveness; the harness does the same, in a scratch buffer.
template <typename Traits, typename M>
int launch_liveness(
    const void* mask,
    uint8_t** live,
    attn::TiledParams& p,
    cudaStream_t stream) {
  attn::TileLivenessParams lp{};
  long long bytes = attn::plan_tile_liveness<Traits::BM, Traits::BN>(
      lp, p.live_strides, p.B, p.H, p.qL, p.kL, p.M_strides);
  cudaError_t err = cudaMallocAsync(
      reinterpret_cast<void**>(live), bytes, stream);
  if (err != cudaSuccess) {
    std::fprintf(stderr, "liveness alloc: %s\n", cudaGetErrorString(err));
    return 4;
  }
  int z = lp.slices < 65535 ? lp.slices : 65535;
  attn::kernel_mask_tile_liveness<M, Traits::BM, Traits::BN>
      <<<dim3(lp.num_k_tiles, lp.num_q_tiles, z), attn::kLivenessThreads, 0,
         stream>>>(static_cast<const M*>(mask), *live, lp);
  return 0;
}

// The GB10 proxy: when set, blocks reserve enough shared memory that a
// second one cannot fit on a multiprocessor (attn::one_block_smem_bytes).
bool g_one_block_per_sm = false;
// Groups each head's query tiles are split into (attn::block_tile); the
// default gives one tile per group, the order MLX used before.
int g_q_tile_groups = 1 << 30;

template <typename Traits, typename T, attn::MaskKind M>
int launch_typed(
    const void* q,
    const void* k,
    const void* v,
    const void* mask,
    const void* sinks,
    void* o,
    const attn::TiledParams& p_in,
    cudaStream_t stream) {
  auto kernel = attn::tiled_kernel<T, Traits, M>();
  attn::TiledParams p = p_in;
  p.num_q_tiles = (p.qL + Traits::BM - 1) / Traits::BM;
  p.q_tile_group = attn::q_tile_group_size(p.num_q_tiles, g_q_tile_groups);
  int smem = Traits::kSmemBytes;
  if (g_one_block_per_sm) {
    int device = 0, per_sm = 0;
    cudaGetDevice(&device);
    cudaDeviceGetAttribute(
        &per_sm, cudaDevAttrMaxSharedMemoryPerMultiprocessor, device);
    smem = attn::one_block_smem_bytes(per_sm, smem);
  }
  cudaError_t err = cudaFuncSetAttribute(
      kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, smem);
  if (err != cudaSuccess) {
    std::fprintf(stderr, "smem attribute: %s\n", cudaGetErrorString(err));
    return 2;
  }
  if constexpr (Traits::kTensorMaps) {
    if (int rc = encode_maps<Traits, T>(q, k, v, p)) {
      return rc;
    }
  }
  uint8_t* live = nullptr;
  if constexpr (attn::is_array_mask(M)) {
    if (int rc = launch_liveness<Traits, attn::MaskElement<T, M>>(
            mask, &live, p, stream)) {
      return rc;
    }
  }
  dim3 grid = attn::tiled_grid(p);
  kernel<<<grid, Traits::THREADS, smem, stream>>>(
      static_cast<const T*>(q),
      static_cast<const T*>(k),
      static_cast<const T*>(v),
      mask,
      live,
      static_cast<const T*>(sinks),
      static_cast<T*>(o),
      p);
  err = cudaGetLastError();
  if (live) {
    cudaFreeAsync(live, stream);
  }
  if (err != cudaSuccess) {
    std::fprintf(stderr, "launch: %s\n", cudaGetErrorString(err));
    return 3;
  }
  return 0;
}

// MLX's configuration C at head dim D, run as MLX runs it: with the traits
// it takes for the mask kind (attn::TiledTraitsForMask).
template <int D, attn::TiledConfig C, typename T>
int launch_mask(int mask_kind, const void* q, const void* k, const void* v,
                const void* mask, const void* sinks, void* o,
                const attn::TiledParams& p, cudaStream_t s) {
  using attn::MaskKind;
  switch (mask_kind) {
    case 0:
      return launch_typed<attn::TiledTraitsForMask<D, C, MaskKind::kNone>, T,
                          MaskKind::kNone>(q, k, v, mask, sinks, o, p, s);
    case 1:
      return launch_typed<attn::TiledTraitsForMask<D, C, MaskKind::kCausal>, T,
                          MaskKind::kCausal>(q, k, v, mask, sinks, o, p, s);
    case 2:
      return launch_typed<attn::TiledTraitsForMask<D, C, MaskKind::kArray>, T,
                          MaskKind::kArray>(q, k, v, mask, sinks, o, p, s);
    case 3:
      return launch_typed<attn::TiledTraitsForMask<D, C, MaskKind::kBool>, T,
                          MaskKind::kBool>(q, k, v, mask, sinks, o, p, s);
    default:
      return 10;
  }
}

template <int D, attn::TiledConfig C>
int launch_dtype(int dtype, int mask_kind, const void* q, const void* k,
                 const void* v, const void* mask, const void* sinks, void* o,
                 const attn::TiledParams& p, cudaStream_t s) {
  switch (dtype) {
    case kFloat16:
      return launch_mask<D, C, __half>(mask_kind, q, k, v, mask, sinks, o, p, s);
    case kBFloat16:
      return launch_mask<D, C, __nv_bfloat16>(
          mask_kind, q, k, v, mask, sinks, o, p, s);
    default:
      return 11;
  }
}

// Config codes (run.py's CONFIGS): 0 = MLX's small (99 KB) configuration,
// 1 = its large one, 4 = its wgmma one (sm_90a only), 9 = its medium
// (163 KB) one. The harness runs only what MLX runs.
template <typename F>
int with_config(int config, F&& f) {
  using attn::TiledConfig;
  switch (config) {
    case 0:
      return f(std::integral_constant<TiledConfig, TiledConfig::kSmall>{});
    case 1:
      return f(std::integral_constant<TiledConfig, TiledConfig::kLarge>{});
    case 4:
      return f(std::integral_constant<TiledConfig, TiledConfig::kHopper>{});
    case 9:
      return f(std::integral_constant<TiledConfig, TiledConfig::kMedium>{});
    default:
      return 12;
  }
}

template <int D>
int launch_config(int config, int dtype, int mask_kind, const void* q,
                  const void* k, const void* v, const void* mask,
                  const void* sinks, void* o, const attn::TiledParams& p,
                  cudaStream_t s) {
  return with_config(config, [&](auto c) {
    return launch_dtype<D, c.value>(dtype, mask_kind, q, k, v, mask, sinks, o,
                                    p, s);
  });
}

} // namespace

extern "C" int harness_sdpa_tiled(
    int head_dim, int config, int dtype, int mask_kind,
    const void* q, const void* k, const void* v, const void* mask,
    const void* sinks, void* o,
    int B, int H, int qL, int kL, int gqa_factor, float scale,
    const long long* q_strides, const long long* k_strides,
    const long long* v_strides, const long long* o_strides,
    const long long* m_strides, void* stream) {
  attn::TiledParams p{};
  p.B = B;
  p.H = H;
  p.qL = qL;
  p.kL = kL;
  p.gqa_factor = gqa_factor;
  p.scale_log2 = scale * attn::kLog2e;
  for (int i = 0; i < 3; ++i) {
    p.Q_strides[i] = q_strides[i];
    p.K_strides[i] = k_strides[i];
    p.V_strides[i] = v_strides[i];
    p.O_strides[i] = o_strides[i];
    p.M_strides[i] = m_strides ? m_strides[i] : 0;
  }
  auto s = static_cast<cudaStream_t>(stream);
  switch (head_dim) {
    case 192:
      return launch_config<192>(config, dtype, mask_kind, q, k, v, mask, sinks, o, p, s);
    case 256:
      return launch_config<256>(config, dtype, mask_kind, q, k, v, mask, sinks, o, p, s);
    case 512:
      return launch_config<512>(config, dtype, mask_kind, q, k, v, mask, sinks, o, p, s);
    default:
      return 13;
  }
}

template <int D>
int smem_bytes(int config) {
  int bytes = with_config(config, [](auto c) {
    return attn::TiledTraitsFor<D, c.value>::kSmemBytes;
  });
  return config == 0 || config == 1 || config == 4 || config == 9 ? bytes : -1;
}

extern "C" void harness_set_q_tile_groups(int groups) {
  g_q_tile_groups = groups;
}

extern "C" void harness_set_one_block_per_sm(int on) {
  g_one_block_per_sm = on != 0;
}

extern "C" int harness_smem_bytes(int head_dim, int config) {
  switch (head_dim) {
    case 192: return smem_bytes<192>(config);
    case 256: return smem_bytes<256>(config);
    case 512: return smem_bytes<512>(config);
    default: return -1;
  }
}

// ---------------------------------------------------------------------------
// Split-K decode kernel (attention_decode.cuh). The caller picks the number
// of splits (MLX's launcher derives it from the SM count) and passes fp32
// scratch for the partial rows: rows = B * H * qL * splits, D floats each,
// plus 2 floats of (max, sum) per row.

namespace {

// Which pass-1 kernel: the scalar one or the tensor-core one for GQA.
constexpr int kDecodeSimt = 0;
constexpr int kDecodeMma = 1;

template <typename T, typename Traits, bool CAUSAL, bool MMA>
int launch_decode_typed(const void* q, const void* k, const void* v,
                        const void* sinks, void* o, float* partial_o,
                        float* partial_state, const attn::DecodeParams& p,
                        cudaStream_t s) {
  constexpr int D = Traits::D;
  dim3 grid(p.num_splits * p.row_groups, p.H / p.gqa_factor, p.B);
  auto kernel = [] {
    if constexpr (MMA) {
      return attn::kernel_sdpa_decode_mma<T, Traits, CAUSAL>;
    } else {
      return attn::kernel_sdpa_decode_split<T, Traits, CAUSAL>;
    }
  }();
  cudaError_t attr = cudaFuncSetAttribute(
      kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, Traits::kSmemBytes);
  if (attr != cudaSuccess) {
    std::fprintf(stderr, "decode smem attribute: %s\n", cudaGetErrorString(attr));
    return 2;
  }
  kernel<<<grid, Traits::THREADS, Traits::kSmemBytes, s>>>(
          static_cast<const T*>(q), static_cast<const T*>(k),
          static_cast<const T*>(v), static_cast<const T*>(sinks),
          static_cast<T*>(o), partial_o,
          reinterpret_cast<float2*>(partial_state), p);
  if (p.num_splits > 1) {
    attn::kernel_sdpa_decode_combine<T, D><<<
        dim3(p.qL * attn::combine_parts<D>(), p.H, p.B), attn::kCombineThreads, 0, s>>>(
        partial_o, reinterpret_cast<const float2*>(partial_state),
        static_cast<const T*>(sinks), static_cast<T*>(o), p);
  }
  cudaError_t err = cudaGetLastError();
  if (err != cudaSuccess) {
    std::fprintf(stderr, "decode launch: %s\n", cudaGetErrorString(err));
    return 3;
  }
  return 0;
}

template <typename T, int D, bool CAUSAL>
int launch_decode_rows(int kind, int rows, const void* q, const void* k,
                       const void* v, const void* sinks, void* o, float* po,
                       float* ps, const attn::DecodeParams& p, cudaStream_t s) {
  if (kind == kDecodeMma) {
    using Traits = attn::DecodeMmaTraitsFor<D>;
    return launch_decode_typed<T, Traits, CAUSAL, true>(q, k, v, sinks, o, po, ps, p, s);
  }
  constexpr int kMax = attn::DecodeConfig<D>::kMaxRows;
  if (rows <= 1) return launch_decode_typed<T, attn::DecodeTraitsFor<D, 1>, CAUSAL, false>(q, k, v, sinks, o, po, ps, p, s);
  if (rows <= 2) return launch_decode_typed<T, attn::DecodeTraitsFor<D, 2>, CAUSAL, false>(q, k, v, sinks, o, po, ps, p, s);
  if (rows <= 4) return launch_decode_typed<T, attn::DecodeTraitsFor<D, 4>, CAUSAL, false>(q, k, v, sinks, o, po, ps, p, s);
  if constexpr (kMax >= 8) {
    if (rows <= 8) return launch_decode_typed<T, attn::DecodeTraitsFor<D, 8>, CAUSAL, false>(q, k, v, sinks, o, po, ps, p, s);
  }
  return 14;
}

template <typename T, int D>
int launch_decode_causal(int kind, bool causal, int rows, const void* q,
                         const void* k, const void* v, const void* sinks,
                         void* o, float* po, float* ps,
                         const attn::DecodeParams& p, cudaStream_t s) {
  return causal ? launch_decode_rows<T, D, true>(kind, rows, q, k, v, sinks, o, po, ps, p, s)
                : launch_decode_rows<T, D, false>(kind, rows, q, k, v, sinks, o, po, ps, p, s);
}

template <int D>
int launch_decode_dtype(int kind, int dtype, bool causal, int rows, const void* q,
                        const void* k, const void* v, const void* sinks,
                        void* o, float* po, float* ps,
                        const attn::DecodeParams& p, cudaStream_t s) {
  switch (dtype) {
    case kFloat16:
      return launch_decode_causal<__half, D>(kind, causal, rows, q, k, v, sinks, o, po, ps, p, s);
    case kBFloat16:
      return launch_decode_causal<__nv_bfloat16, D>(kind, causal, rows, q, k, v, sinks, o, po, ps, p, s);
    default:
      return 11;
  }
}

} // namespace

namespace {

template <int D>
int decode_max_rows(int kind) {
  return kind == kDecodeMma ? attn::kDecodeMmaRows : attn::DecodeConfig<D>::kMaxRows;
}

template <int D>
int decode_smem_bytes(int kind) {
  return kind == kDecodeMma
      ? attn::DecodeMmaTraitsFor<D>::kSmemBytes
      : attn::DecodeTraitsFor<D, attn::DecodeConfig<D>::kMaxRows>::kSmemBytes;
}

} // namespace

// Max rows per CTA for a head dim and kernel (the launcher's row grouping).
extern "C" int harness_decode_max_rows(int kind, int head_dim) {
  switch (head_dim) {
    case 192: return decode_max_rows<192>(kind);
    case 256: return decode_max_rows<256>(kind);
    case 512: return decode_max_rows<512>(kind);
    default: return -1;
  }
}

// Dynamic shared memory of the pass-1 kernel a call would launch (the
// scalar one at its largest row count).
extern "C" int harness_decode_smem_bytes(int kind, int head_dim) {
  switch (head_dim) {
    case 192: return decode_smem_bytes<192>(kind);
    case 256: return decode_smem_bytes<256>(kind);
    case 512: return decode_smem_bytes<512>(kind);
    default: return -1;
  }
}

extern "C" int harness_sdpa_decode(
    int kind, int head_dim, int dtype, int causal, const void* q, const void* k,
    const void* v, const void* sinks, void* o, float* partial_o,
    float* partial_state, int B, int H, int qL, int kL, int gqa_factor,
    int num_splits, float scale, const long long* q_strides,
    const long long* k_strides, const long long* v_strides,
    const long long* o_strides, void* stream) {
  attn::DecodeParams p{};
  p.B = B;
  p.H = H;
  p.qL = qL;
  p.kL = kL;
  p.gqa_factor = gqa_factor;
  p.rows = gqa_factor * qL;
  int max_rows = harness_decode_max_rows(kind, head_dim);
  if (max_rows < 0) return 13;
  p.rows_per_cta = p.rows < max_rows ? p.rows : max_rows;
  p.row_groups = (p.rows + p.rows_per_cta - 1) / p.rows_per_cta;
  p.keys_per_split = (kL + num_splits - 1) / num_splits;
  p.num_splits = (kL + p.keys_per_split - 1) / p.keys_per_split;
  p.scale_log2 = scale * attn::kLog2e;
  for (int i = 0; i < 3; ++i) {
    p.Q_strides[i] = q_strides[i];
    p.K_strides[i] = k_strides[i];
    p.V_strides[i] = v_strides[i];
    p.O_strides[i] = o_strides[i];
  }
  auto s = static_cast<cudaStream_t>(stream);
  switch (head_dim) {
    case 192:
      return launch_decode_dtype<192>(kind, dtype, causal, p.rows_per_cta, q, k, v, sinks, o, partial_o, partial_state, p, s);
    case 256:
      return launch_decode_dtype<256>(kind, dtype, causal, p.rows_per_cta, q, k, v, sinks, o, partial_o, partial_state, p, s);
    case 512:
      return launch_decode_dtype<512>(kind, dtype, causal, p.rows_per_cta, q, k, v, sinks, o, partial_o, partial_state, p, s);
    default:
      return 13;
  }
}

// The splits MLX's launcher would choose (scaled_dot_product_attention_decode.cu).
extern "C" int harness_decode_effective_splits(int kL, int num_splits) {
  int per = (kL + num_splits - 1) / num_splits;
  return (kL + per - 1) / per;
}
