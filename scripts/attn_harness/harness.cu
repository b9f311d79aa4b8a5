// Standalone harness for MLX's tiled CUDA attention kernel.
//
// Compiles the kernel header from a patched MLX tree (-I <mlx-root>) into a
// small shared library with a C entry point, so a Python driver can hand it
// device pointers from PyTorch tensors and check it against a reference in
// seconds instead of rebuilding MLX. Nothing here re-implements the kernel:
// it only instantiates and launches what the patch adds.

#include "mlx/backend/cuda/device/attention_tiled.cuh"

#include <cuda_runtime.h>

#include <cstdio>
#include <type_traits>

namespace attn = mlx::core::cu::attention;

namespace {

enum DtypeCode { kFloat16 = 0, kBFloat16 = 1 };

template <int D, attn::TiledConfig C, typename T, attn::MaskKind M>
int launch_typed(
    const void* q,
    const void* k,
    const void* v,
    const void* mask,
    const void* sinks,
    void* o,
    const attn::TiledParams& p_in,
    cudaStream_t stream) {
  using Traits = attn::TiledTraitsFor<D, C>;
  auto kernel = attn::kernel_sdpa_tiled<T, Traits, M>;
  attn::TiledParams p = p_in;
  p.num_q_tiles = (p.qL + Traits::BM - 1) / Traits::BM;
  cudaError_t err = cudaFuncSetAttribute(
      kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, Traits::kSmemBytes);
  if (err != cudaSuccess) {
    std::fprintf(stderr, "smem attribute: %s\n", cudaGetErrorString(err));
    return 2;
  }
  dim3 grid(p.num_q_tiles, p.H, p.B);
  kernel<<<grid, Traits::THREADS, Traits::kSmemBytes, stream>>>(
      static_cast<const T*>(q),
      static_cast<const T*>(k),
      static_cast<const T*>(v),
      static_cast<const T*>(mask),
      static_cast<const T*>(sinks),
      static_cast<T*>(o),
      p);
  err = cudaGetLastError();
  if (err != cudaSuccess) {
    std::fprintf(stderr, "launch: %s\n", cudaGetErrorString(err));
    return 3;
  }
  return 0;
}

template <int D, attn::TiledConfig C, typename T>
int launch_mask(int mask_kind, const void* q, const void* k, const void* v,
                const void* mask, const void* sinks, void* o,
                const attn::TiledParams& p, cudaStream_t s) {
  switch (mask_kind) {
    case 0:
      return launch_typed<D, C, T, attn::MaskKind::kNone>(
          q, k, v, mask, sinks, o, p, s);
    case 1:
      return launch_typed<D, C, T, attn::MaskKind::kCausal>(
          q, k, v, mask, sinks, o, p, s);
    case 2:
      return launch_typed<D, C, T, attn::MaskKind::kArray>(
          q, k, v, mask, sinks, o, p, s);
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

template <int D>
int launch_config(int config, int dtype, int mask_kind, const void* q,
                  const void* k, const void* v, const void* mask,
                  const void* sinks, void* o, const attn::TiledParams& p,
                  cudaStream_t s) {
  switch (config) {
    case 0:
      return launch_dtype<D, attn::TiledConfig::kSmall>(
          dtype, mask_kind, q, k, v, mask, sinks, o, p, s);
    case 1:
      return launch_dtype<D, attn::TiledConfig::kLarge>(
          dtype, mask_kind, q, k, v, mask, sinks, o, p, s);
    default:
      return 12;
  }
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

extern "C" int harness_smem_bytes(int head_dim, int config) {
  using attn::TiledConfig;
  auto pick = [&](auto d) {
    return config == 1 ? attn::TiledTraitsFor<decltype(d)::value, TiledConfig::kLarge>::kSmemBytes
                       : attn::TiledTraitsFor<decltype(d)::value, TiledConfig::kSmall>::kSmemBytes;
  };
  switch (head_dim) {
    case 192: return pick(std::integral_constant<int, 192>{});
    case 256: return pick(std::integral_constant<int, 256>{});
    case 512: return pick(std::integral_constant<int, 512>{});
    default: return -1;
  }
}
