// One configuration of CUTLASS's Hopper mixed-input GEMM as qmm_sm90 builds
// it (w as A, 4-bit affine, scales and zeros [K / group, N]; x as B; out
// [M, N]), compiled once per VARIANT so that the variants compile in
// parallel. sm90_bench.cu times them side by side.

#include <cute/tensor.hpp>
#include <cutlass/cutlass.h>
#include <cutlass/epilogue/collective/collective_builder.hpp>
#include <cutlass/gemm/collective/collective_builder.hpp>
#include <cutlass/gemm/device/gemm_universal_adapter.h>
#include <cutlass/gemm/kernel/gemm_universal.hpp>

#include "sm90_variant.h"

#include <cstdio>
#include <type_traits>

using namespace cute;

// Tile rows of w and of x, cluster CTAs along w and along x, and whether
// each consumer warpgroup takes its own tile (ping-pong) or both share one
// (cooperative).
#if VARIANT == 0 // qmm_sm90 as MLX builds it from 129 rows
#define CONFIG 128, 256, 1, 1, false
#elif VARIANT == 1 // two CTAs along w share each x tile
#define CONFIG 128, 256, 2, 1, false
#elif VARIANT == 2 // two CTAs along x share each w tile
#define CONFIG 128, 256, 1, 2, false
#elif VARIANT == 3
#define CONFIG 128, 128, 1, 1, false
#elif VARIANT == 4 // epilogues overlap the other warpgroup's mainloop
#define CONFIG 64, 256, 1, 1, true
#elif VARIANT == 5
#define CONFIG 64, 128, 1, 1, true
#elif VARIANT == 6
#define CONFIG 256, 128, 1, 1, false
#elif VARIANT == 7
#define CONFIG 128, 256, 2, 2, false
#else
#error "unknown VARIANT"
#endif

namespace {

template <int TileW, int TileX, int ClusterW, int ClusterX, bool PingPong>
struct Config {
  static constexpr int tile_w = TileW, tile_x = TileX;
  static constexpr int cluster_w = ClusterW, cluster_x = ClusterX;
  static constexpr bool ping_pong = PingPong;
  using Tile = Shape<Int<TileW>, Int<TileX>, _64>;
  using Cluster = Shape<Int<ClusterW>, Int<ClusterX>, _1>;
  using Schedule = std::conditional_t<
      PingPong,
      cutlass::gemm::KernelTmaWarpSpecializedPingpong,
      cutlass::gemm::KernelTmaWarpSpecializedCooperative>;
  using EpiSchedule = std::conditional_t<
      PingPong,
      cutlass::epilogue::TmaWarpSpecialized,
      cutlass::epilogue::TmaWarpSpecializedCooperative>;
};
using Cfg = Config<CONFIG>;
using CtaTile = Cfg::Tile;
using CtaCluster = Cfg::Cluster;

using Element = cutlass::bfloat16_t;
using Quant = cutlass::uint4b_t;
constexpr int AlignmentA = 128 / cutlass::sizeof_bits<Element>::value;
constexpr int AlignmentB = 128 / cutlass::sizeof_bits<Quant>::value;

using Epilogue = typename cutlass::epilogue::collective::CollectiveBuilder<
    cutlass::arch::Sm90, cutlass::arch::OpClassTensorOp, CtaTile, CtaCluster,
    cutlass::epilogue::collective::EpilogueTileAuto, float, float, void,
    cutlass::layout::ColumnMajor, AlignmentA, Element,
    cutlass::layout::ColumnMajor, AlignmentA, Cfg::EpiSchedule>::CollectiveOp;

using Mainloop = typename cutlass::gemm::collective::CollectiveBuilder<
    cutlass::arch::Sm90, cutlass::arch::OpClassTensorOp,
    tuple<Quant, Element, Element>, cutlass::layout::RowMajor, AlignmentB,
    Element, cutlass::layout::ColumnMajor, AlignmentA, float, CtaTile, CtaCluster,
    cutlass::gemm::collective::StageCountAutoCarveout<static_cast<int>(
        sizeof(typename Epilogue::SharedStorage))>,
    Cfg::Schedule>::CollectiveOp;

using Kernel = cutlass::gemm::kernel::
    GemmUniversal<Shape<int, int, int, int>, Mainloop, Epilogue>;
using Gemm = cutlass::gemm::device::GemmUniversalAdapter<Kernel>;
using Raster = typename Kernel::TileScheduler::RasterOrderOptions;

// Runs out = x @ dequant(w).T on stream, or returns why it cannot.
const char* run(const Problem& p, const Launch& l, cudaStream_t stream) {
  static Gemm gemm;
  int m = p.m, n = p.n, k = p.k;
  auto dA = make_stride(int64_t(k), Int<1>{}, int64_t(m) * k);
  auto dB = make_stride(int64_t(k), Int<1>{}, int64_t(n) * k);
  auto dS = make_stride(Int<1>{}, int64_t(n), int64_t(n) * k / kGroupSize);
  auto dD = make_stride(Int<1>{}, int64_t(n), int64_t(m) * n);
  typename Gemm::Arguments args{
      cutlass::gemm::GemmUniversalMode::kGemm,
      {n, m, k, 1},
      {static_cast<const Quant*>(p.w), dB, static_cast<const Element*>(p.x),
       dA, static_cast<const Element*>(p.scales), dS, kGroupSize,
       static_cast<const Element*>(p.biases)},
      {{1.f, 0.f}, static_cast<Element*>(p.out), dD,
       static_cast<Element*>(p.out), dD}};
  args.scheduler.max_swizzle_size = l.swizzle;
  args.scheduler.raster_order = l.raster == 1 ? Raster::AlongM
      : l.raster == 2                         ? Raster::AlongN
                                              : Raster::Heuristic;
  if (Gemm::can_implement(args) != cutlass::Status::kSuccess) {
    return "cannot implement";
  }
  if (Gemm::get_workspace_size(args) > 0) {
    return "needs a workspace";
  }
  if (gemm.initialize(args, nullptr, stream) != cutlass::Status::kSuccess) {
    return "initialize failed";
  }
  if (gemm.run(stream) != cutlass::Status::kSuccess) {
    return "launch failed";
  }
  return nullptr;
}

} // namespace

#define CAT2(a, b) a##b
#define CAT(a, b) CAT2(a, b)

extern "C" Variant CAT(variant_, VARIANT)() {
  static char name[48];
  std::snprintf(name, sizeof(name), "%s %dx%dx64 c%dx%d",
                Cfg::ping_pong ? "pingpong" : "coop", Cfg::tile_w,
                Cfg::tile_x, Cfg::cluster_w, Cfg::cluster_x);
  return Variant{name, int(sizeof(typename Kernel::SharedStorage)), &run};
}
