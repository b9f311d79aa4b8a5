// Registers and spills of every tiled configuration MLX compiles (head dims
// 192, 256, 512; small / medium / large / hopper), causal bf16, per
// architecture:
//   nvcc -std=c++17 -O3 -DNDEBUG -arch=sm_XX -cubin -Xptxas -v \
//     -I<patched MLX tree> ptxas_probe.cu
// (-DNDEBUG as MLX's release build compiles it). Takes the address of each
// kernel so that ptxas compiles it; nothing here runs. The hopper kernels
// have a body on sm_90a only.
#include "mlx/backend/cuda/device/attention_ws.cuh"

namespace attn = mlx::core::cu::attention;

template <int D, attn::TiledConfig C>
void* kernel_address() {
  return reinterpret_cast<void*>(attn::tiled_kernel<
                                 __nv_bfloat16,
                                 attn::TiledTraitsFor<D, C>,
                                 attn::MaskKind::kCausal>());
}

#define MLX_PROBE(D)                                     \
  kernel_address<D, attn::TiledConfig::kSmall>(),        \
      kernel_address<D, attn::TiledConfig::kMedium>(),   \
      kernel_address<D, attn::TiledConfig::kLarge>(),    \
      kernel_address<D, attn::TiledConfig::kHopper>()

void* probes[] = {MLX_PROBE(192), MLX_PROBE(256), MLX_PROBE(512)};
