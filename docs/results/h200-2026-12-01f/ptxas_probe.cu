// Registers and spills of the part-Q mma.sync tiles (head dims 192, 256, 512), per architecture:
//   nvcc -std=c++17 -O3 -arch=sm_XX -c -Xptxas -v -I<patched MLX tree> ptxas_probe.cu
// Takes the address of the causal bf16 kernel of each configuration so that
// ptxas compiles it; nothing here runs.
#include "mlx/backend/cuda/device/attention_tiled.cuh"

namespace attn = mlx::core::cu::attention;

template <typename Traits>
void* kernel_address() {
  return reinterpret_cast<void*>(
      &attn::kernel_sdpa_tiled<__nv_bfloat16, Traits, attn::MaskKind::kCausal>);
}

void* probes[] = {
    kernel_address<attn::TiledTraitsFor<192, attn::TiledConfig::kSmall>>(),
    kernel_address<attn::TiledTraitsFor<256, attn::TiledConfig::kSmall>>(),
    kernel_address<attn::TiledTraitsFor<256, attn::TiledConfig::kMedium>>(),
    kernel_address<attn::TiledTraitsFor<512, attn::TiledConfig::kSmall>>(),
    kernel_address<attn::TiledTraitsFor<512, attn::TiledConfig::kMedium>>(),
};
