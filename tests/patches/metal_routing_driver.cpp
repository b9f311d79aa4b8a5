// Host-side driver for mlx/backend/metal/sdpa_routing.h, the head dim 192/256
// routing decision carried by the Metal patches. tests/test_metal_routing.py
// extracts the header from a patch, compiles this file against it and feeds
// it one request per line on stdin:
//
//   route HQ HV B H QL KL BYTES MAXBUF MINKL FORCE  -> not_routed|unfused|fused
//   score B H QL KL BYTES                           -> unfused score bytes
//   budget MAXBUF                                   -> score budget in bytes
//   force VALUE                                     -> none|unfused|fused|invalid
//   minkl VALUE                                     -> parsed fused min kL
//   env                                             -> overrides from the env
//
// FORCE is none|unfused|fused; VALUE is a word, <empty> or <unset>.
#include <cstdint>
#include <iostream>
#include <sstream>
#include <stdexcept>
#include <string>

#include "mlx/backend/metal/sdpa_routing.h"

namespace rt = mlx::core::metal;

// The decision must stay usable at compile time (constexpr, no Metal).
static_assert(
    rt::sdpa_full_route(256, 256, 1, 8, 2048, 16385, 2, 0) ==
    rt::SdpaFullRoute::fused);
static_assert(
    rt::sdpa_parse_force_path("unfused") == rt::SdpaForcePath::unfused);

static const char* route_name(rt::SdpaFullRoute r) {
  switch (r) {
    case rt::SdpaFullRoute::not_routed:
      return "not_routed";
    case rt::SdpaFullRoute::unfused:
      return "unfused";
    case rt::SdpaFullRoute::fused:
      return "fused";
  }
  return "?";
}

static const char* force_name(rt::SdpaForcePath f) {
  switch (f) {
    case rt::SdpaForcePath::none:
      return "none";
    case rt::SdpaForcePath::unfused:
      return "unfused";
    case rt::SdpaForcePath::fused:
      return "fused";
    case rt::SdpaForcePath::invalid:
      return "invalid";
  }
  return "?";
}

static rt::SdpaForcePath force_from_name(const std::string& name) {
  if (name == "none") {
    return rt::SdpaForcePath::none;
  }
  if (name == "unfused") {
    return rt::SdpaForcePath::unfused;
  }
  if (name == "fused") {
    return rt::SdpaForcePath::fused;
  }
  throw std::invalid_argument("bad FORCE " + name);
}

// <unset> is a null pointer, <empty> an empty string.
static const char* value_arg(const std::string& word) {
  if (word == "<unset>") {
    return nullptr;
  }
  if (word == "<empty>") {
    return "";
  }
  return word.c_str();
}

int main() {
  std::string line;
  while (std::getline(std::cin, line)) {
    std::istringstream in(line);
    std::string cmd;
    in >> cmd;
    if (cmd == "route") {
      int hq = 0, hv = 0;
      int64_t b = 0, h = 0, ql = 0, kl = 0, bytes = 0, maxbuf = 0, minkl = 0;
      std::string force;
      in >> hq >> hv >> b >> h >> ql >> kl >> bytes >> maxbuf >> minkl >> force;
      rt::SdpaRoutingOverrides overrides;
      overrides.fused_min_kl = minkl;
      overrides.force_path = force_from_name(force);
      std::cout << route_name(rt::sdpa_full_route(
                       hq, hv, b, h, ql, kl, bytes, maxbuf, overrides))
                << "\n";
    } else if (cmd == "score") {
      int64_t b = 0, h = 0, ql = 0, kl = 0, bytes = 0;
      in >> b >> h >> ql >> kl >> bytes;
      std::cout << rt::sdpa_unfused_score_bytes(b, h, ql, kl, bytes) << "\n";
    } else if (cmd == "budget") {
      int64_t maxbuf = 0;
      in >> maxbuf;
      std::cout << rt::sdpa_unfused_score_budget(maxbuf) << "\n";
    } else if (cmd == "force" || cmd == "minkl") {
      std::string word;
      in >> word;
      if (cmd == "force") {
        std::cout << force_name(rt::sdpa_parse_force_path(value_arg(word)))
                  << "\n";
      } else {
        std::cout << rt::sdpa_parse_fused_min_kl(value_arg(word)) << "\n";
      }
    } else if (cmd == "env") {
      try {
        auto o = rt::sdpa_routing_overrides_from_env();
        std::cout << "minkl=" << o.fused_min_kl
                  << " force=" << force_name(o.force_path) << "\n";
      } catch (const std::invalid_argument& e) {
        std::cout << "error: " << e.what() << "\n";
      }
    } else {
      std::cerr << "unknown request: " << line << "\n";
      return 2;
    }
  }
  return 0;
}
