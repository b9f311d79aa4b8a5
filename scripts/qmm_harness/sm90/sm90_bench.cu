// Times the qmm_sm90 configurations compiled from sm90_variant.cu at
// gemma-4 31B's linear shapes (4-bit, group 64, bf16) and checks each
// against a float64 reference on sampled outputs. One JSON object per line.
//
//   sm90_bench [--ms 2048 32768] [--reps 20] [--rounds 3] [--variants 0 3]
//              [--normal] [--list]
//
// --normal draws x and w from normal distributions and quantizes w per
// group as mx.quantize does (scale (max - min) / 15, bias min), the data
// MLX's benchmarks time; otherwise x, the packed bytes, scales and biases
// are uniform. --list prints the variants and exits (no GPU needed).

#include "sm90_variant.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include <cuda_bf16.h>

#define CHECK(call)                                                     \
  do {                                                                  \
    cudaError_t e = (call);                                             \
    if (e != cudaSuccess) {                                             \
      std::fprintf(stderr, "%s:%d %s\n", __FILE__, __LINE__,            \
                   cudaGetErrorString(e));                              \
      std::exit(3);                                                     \
    }                                                                   \
  } while (0)

extern "C" {
Variant variant_0();
Variant variant_1();
Variant variant_2();
Variant variant_3();
Variant variant_4();
Variant variant_5();
Variant variant_6();
Variant variant_7();
}

namespace {

struct Shape {
  const char* name;
  int n, k;
};

// gemma-4 31B (hidden 5376), as shapes.py lists them.
const Shape kShapes[] = {
    {"q_sliding", 8192, 5376},  {"q_global", 16384, 5376},
    {"kv_sliding", 4096, 5376}, {"o_sliding", 5376, 8192},
    {"mlp_gate_up", 43008, 5376}, {"mlp_down", 5376, 21504},
};

const Launch kLaunches[] = {{1, 0}, {2, 1}, {2, 2}, {4, 1},
                            {4, 2}, {8, 1}, {8, 2}};

float bf16_to_float(uint16_t v) {
  uint32_t u = uint32_t(v) << 16;
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

uint16_t float_to_bf16(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  u += 0x7fff + ((u >> 16) & 1);
  return uint16_t(u >> 16);
}

struct Host {
  std::vector<uint16_t> x, scales, biases;
  std::vector<uint8_t> w;
};

double reference(const Host& h, int n, int k, int i, int j) {
  double acc = 0;
  for (int c = 0; c < k; ++c) {
    uint8_t byte = h.w[(size_t(j) * k + c) / 2];
    int q = (c & 1) ? (byte >> 4) : (byte & 15);
    size_t g = size_t(c / kGroupSize) * n + j;
    double wv = double(bf16_to_float(h.scales[g])) * q +
        bf16_to_float(h.biases[g]);
    acc += double(bf16_to_float(h.x[size_t(i) * k + c])) * wv;
  }
  return acc;
}

Host sized(int m, int n, int k) {
  Host h;
  h.x.resize(size_t(m) * k);
  h.w.resize(size_t(n) * k / 2);
  h.scales.resize(size_t(k / kGroupSize) * n);
  h.biases.resize(h.scales.size());
  return h;
}

// x, the packed bytes, scales and biases uniform.
Host uniform_data(int m, int n, int k, std::mt19937& rng) {
  std::uniform_real_distribution<float> unit(-1.f, 1.f);
  Host h = sized(m, n, k);
  for (auto& v : h.x) v = float_to_bf16(unit(rng));
  for (auto& v : h.w) v = uint8_t(rng());
  for (auto& v : h.scales) v = float_to_bf16(0.02f + 0.01f * unit(rng));
  for (auto& v : h.biases) v = float_to_bf16(-0.15f + 0.05f * unit(rng));
  return h;
}

// x normal, w normal quantized per group as mx.quantize does.
Host normal_data(int m, int n, int k, std::mt19937& rng) {
  std::normal_distribution<float> gauss(0.f, 1.f);
  Host h = sized(m, n, k);
  for (auto& v : h.x) v = float_to_bf16(gauss(rng));
  std::vector<float> g(kGroupSize);
  for (int j = 0; j < n; ++j) {
    for (int c0 = 0; c0 < k; c0 += kGroupSize) {
      for (auto& v : g) v = 0.05f * gauss(rng);
      auto [lo, hi] = std::minmax_element(g.begin(), g.end());
      float bias = *lo, scale = std::max(*hi - *lo, 1e-6f) / 15.f;
      size_t gi = size_t(c0 / kGroupSize) * n + j;
      h.scales[gi] = float_to_bf16(scale);
      h.biases[gi] = float_to_bf16(bias);
      for (int c = 0; c < kGroupSize; ++c) {
        int q = std::clamp(int(std::lround((g[c] - bias) / scale)), 0, 15);
        size_t e = size_t(j) * k + c0 + c;
        h.w[e / 2] |= uint8_t(q << ((e & 1) * 4));
      }
    }
  }
  return h;
}

} // namespace

int main(int argc, char** argv) {
  std::vector<int> ms = {2048, 32768};
  int reps = 20, rounds = 3;
  bool normal = false, list = false;
  std::vector<int> only;
  for (int a = 1; a < argc; ++a) {
    if (!std::strcmp(argv[a], "--ms")) {
      ms.clear();
      while (a + 1 < argc && argv[a + 1][0] != '-') {
        ms.push_back(std::atoi(argv[++a]));
      }
    } else if (!std::strcmp(argv[a], "--reps") && a + 1 < argc) {
      reps = std::atoi(argv[++a]);
    } else if (!std::strcmp(argv[a], "--variants")) {
      while (a + 1 < argc && argv[a + 1][0] != '-') {
        only.push_back(std::atoi(argv[++a]));
      }
    } else if (!std::strcmp(argv[a], "--normal")) {
      normal = true;
    } else if (!std::strcmp(argv[a], "--rounds") && a + 1 < argc) {
      rounds = std::atoi(argv[++a]);
    } else if (!std::strcmp(argv[a], "--list")) {
      list = true;
    } else {
      std::fprintf(stderr,
                   "usage: %s [--ms M ...] [--reps R] [--rounds N] "
                   "[--variants I ...] [--normal] [--list]\n",
                   argv[0]);
      return 2;
    }
  }
  std::vector<Variant> variants = {variant_0(), variant_1(), variant_2(),
                                   variant_3(), variant_4(), variant_5(),
                                   variant_6(), variant_7()};
  if (!only.empty()) {
    std::vector<Variant> picked;
    for (int i : only) {
      if (i < 0 || i >= int(variants.size())) {
        std::fprintf(stderr, "no variant %d\n", i);
        return 2;
      }
      picked.push_back(variants[i]);
    }
    variants = picked;
  }
  if (list) {
    for (const Variant& v : variants) {
      std::printf("%s (%d bytes of shared memory)\n", v.name, v.smem_bytes);
    }
    return 0;
  }
  cudaStream_t stream;
  CHECK(cudaStreamCreate(&stream));
  cudaEvent_t start, stop;
  CHECK(cudaEventCreate(&start));
  CHECK(cudaEventCreate(&stop));
  std::mt19937 rng(std::random_device{}());

  for (int m : ms) {
    for (const Shape& s : kShapes) {
      Host h = normal ? normal_data(m, s.n, s.k, rng)
                      : uniform_data(m, s.n, s.k, rng);
      size_t nx = h.x.size(), nw = h.w.size(), ng = h.scales.size(),
             no = size_t(m) * s.n;
      void *x, *w, *sc, *bi, *out;
      CHECK(cudaMalloc(&x, nx * 2));
      CHECK(cudaMalloc(&w, nw));
      CHECK(cudaMalloc(&sc, ng * 2));
      CHECK(cudaMalloc(&bi, ng * 2));
      CHECK(cudaMalloc(&out, no * 2));
      CHECK(cudaMemcpy(x, h.x.data(), nx * 2, cudaMemcpyHostToDevice));
      CHECK(cudaMemcpy(w, h.w.data(), nw, cudaMemcpyHostToDevice));
      CHECK(cudaMemcpy(sc, h.scales.data(), ng * 2, cudaMemcpyHostToDevice));
      CHECK(cudaMemcpy(bi, h.biases.data(), ng * 2, cudaMemcpyHostToDevice));
      Problem p{m, s.n, s.k, x, w, sc, bi, out};

      // Sampled outputs against float64, including the last row and column.
      std::vector<std::pair<int, int>> samples = {{m - 1, s.n - 1}, {0, 0}};
      for (int t = 0; t < 62; ++t) {
        samples.push_back({int(rng() % m), int(rng() % s.n)});
      }
      std::vector<double> ref;
      double ref_max = 0;
      for (auto [i, j] : samples) {
        ref.push_back(reference(h, s.n, s.k, i, j));
        ref_max = std::max(ref_max, std::abs(ref.back()));
      }
      double flop = 2.0 * m * s.n * s.k;

      for (const Variant& v : variants) {
        for (const Launch& l : kLaunches) {
          CHECK(cudaMemset(out, 0xff, no * 2)); // NaN until written
          const char* why = v.run(p, l, stream);
          if (why) {
            std::printf("{\"shape\":\"%s\",\"m\":%d,\"variant\":\"%s\","
                        "\"swizzle\":%d,\"raster\":%d,\"skipped\":\"%s\"}\n",
                        s.name, m, v.name, l.swizzle, l.raster, why);
            continue;
          }
          CHECK(cudaStreamSynchronize(stream));
          CHECK(cudaGetLastError());
          double err = 0;
          bool nan = false;
          for (size_t t = 0; t < samples.size(); ++t) {
            uint16_t o;
            auto [i, j] = samples[t];
            CHECK(cudaMemcpy(&o, static_cast<uint16_t*>(out) +
                                     size_t(i) * s.n + j,
                             2, cudaMemcpyDeviceToHost));
            double got = bf16_to_float(o);
            if (std::isnan(got)) nan = true;
            err = std::max(err, std::abs(got - ref[t]) / ref_max);
          }
          std::vector<float> ms_per;
          for (int r = 0; r < rounds; ++r) {
            v.run(p, l, stream);
            CHECK(cudaEventRecord(start, stream));
            for (int t = 0; t < reps; ++t) v.run(p, l, stream);
            CHECK(cudaEventRecord(stop, stream));
            CHECK(cudaEventSynchronize(stop));
            float ms_total;
            CHECK(cudaEventElapsedTime(&ms_total, start, stop));
            ms_per.push_back(ms_total / reps);
          }
          std::sort(ms_per.begin(), ms_per.end());
          std::printf(
              "{\"shape\":\"%s\",\"m\":%d,\"n\":%d,\"k\":%d,\"data\":\"%s\","
              "\"variant\":\"%s\","
              "\"smem\":%d,\"swizzle\":%d,\"raster\":%d,\"max_rel_err\":%.3e,"
              "\"nan\":%s,\"ok\":%s,\"tflops_best\":%.1f,"
              "\"tflops_median\":%.1f}\n",
              s.name, m, s.n, s.k, normal ? "normal" : "uniform", v.name,
              v.smem_bytes, l.swizzle, l.raster,
              err, nan ? "true" : "false",
              (!nan && err < 1e-2) ? "true" : "false",
              flop / ms_per.front() / 1e9, flop / ms_per[ms_per.size() / 2] / 1e9);
          std::fflush(stdout);
        }
      }
      CHECK(cudaFree(x));
      CHECK(cudaFree(w));
      CHECK(cudaFree(sc));
      CHECK(cudaFree(bi));
      CHECK(cudaFree(out));
    }
  }
  return 0;
}
