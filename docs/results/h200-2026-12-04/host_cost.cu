// What the tiled SDPA launcher's host work costs per call, piece by piece:
// the two device attributes it reads, cudaFuncSetAttribute on the kernel,
// and encoding the Q, K and V tensor maps (encode_tiled_maps). Nothing is
// launched. Build and run (sm_90a, on the GPU):
//   nvcc -std=c++17 -O3 -DNDEBUG -arch=sm_90a -I<patched MLX tree> \
//     host_cost.cu -o host_cost && ./host_cost
// (cuTensorMapEncodeTiled through the runtime's driver entry point, as the
// harness takes it; MLX links the driver and calls it directly).
#include <chrono>
#include <cstdio>

#include "mlx/backend/cuda/device/attention_ws.cuh"

namespace attn = mlx::core::cu::attention;

template <typename F>
double us_per_call(F&& f, int iters = 20000) {
  for (int i = 0; i < 100; ++i) {
    f();
  }
  auto t0 = std::chrono::steady_clock::now();
  for (int i = 0; i < iters; ++i) {
    f();
  }
  auto t1 = std::chrono::steady_clock::now();
  return std::chrono::duration<double, std::micro>(t1 - t0).count() / iters;
}

using EncodeTiled = CUresult (*)(
    CUtensorMap*, CUtensorMapDataType, cuuint32_t, void*, const cuuint64_t*,
    const cuuint64_t*, const cuuint32_t*, const cuuint32_t*,
    CUtensorMapInterleave, CUtensorMapSwizzle, CUtensorMapL2promotion,
    CUtensorMapFloatOOBfill);

int main() {
  void* entry = nullptr;
  cudaDriverEntryPointQueryResult found;
  if (cudaGetDriverEntryPointByVersion(
          "cuTensorMapEncodeTiled", &entry, 12000, cudaEnableDefault,
          &found) != cudaSuccess ||
      found != cudaDriverEntryPointSuccess) {
    std::printf("cuTensorMapEncodeTiled not found\n");
    return 1;
  }
  auto encode = reinterpret_cast<EncodeTiled>(entry);
  using Traits = attn::TiledTraitsFor<256, attn::TiledConfig::kHopper>;
  auto kernel = attn::tiled_kernel<__nv_bfloat16, Traits, attn::MaskKind::kCausal>();
  void* buf = nullptr;
  const int B = 1, H = 32, Hkv = 16, L = 8192, D = 256;
  if (cudaMalloc(&buf, size_t(B) * H * L * D * 2 * 3) != cudaSuccess) {
    std::printf("cudaMalloc failed\n");
    return 1;
  }
  int dev = 0, value = 0;
  cudaFree(nullptr);
  attn::TiledParams params{};
  params.B = B;
  params.H = H;
  params.qL = L;
  params.kL = L;
  params.gqa_factor = H / Hkv;
  const int64_t strides[3] = {int64_t(H) * L * D, int64_t(L) * D, D};
  for (int i = 0; i < 3; ++i) {
    params.Q_strides[i] = params.K_strides[i] = params.V_strides[i] = strides[i];
  }
  char* base = static_cast<char*>(buf);
  const size_t bytes = size_t(B) * H * L * D * 2;

  double attr = us_per_call([&] {
    cudaDeviceGetAttribute(&value, cudaDevAttrMaxSharedMemoryPerBlockOptin, dev);
  });
  double attr_sm = us_per_call([&] {
    cudaDeviceGetAttribute(&value, cudaDevAttrMaxSharedMemoryPerMultiprocessor, dev);
  });
  double func = us_per_call([&] {
    cudaFuncSetAttribute(
        kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, Traits::kSmemBytes);
  });
  double maps = us_per_call([&] {
    attn::encode_tiled_maps<Traits>(
        encode, params, CU_TENSOR_MAP_DATA_TYPE_BFLOAT16,
        base, base + bytes, base + 2 * bytes);
  });
  std::printf("cudaDeviceGetAttribute(smem optin)  %.3f us\n", attr);
  std::printf("cudaDeviceGetAttribute(smem per SM) %.3f us\n", attr_sm);
  std::printf("cudaFuncSetAttribute(max dyn smem)  %.3f us\n", func);
  std::printf("encode_tiled_maps (Q, K, V)         %.3f us\n", maps);
  std::printf("sum                                 %.3f us\n",
              attr + func + maps);
  cudaFree(buf);
  return 0;
}
