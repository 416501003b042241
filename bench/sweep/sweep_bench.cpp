// Search-space sweep: for each workload, N configs drawn uniformly from the valid configs of the
// template's config space plus the default config are lowered, JIT-compiled with LLVM and timed in
// this process on one thread, against oneDNN (and OpenBLAS for dense) measured in the same run. One
// line per workload:
//   sweep op= shape= configs= failed= best_gflops= default_gflops= peer=onednn peer_gflops=
//         [weights=prepacked peer_weights= onednn_plain_gflops= openblas_gflops=] ratio_best= ratio_default=
// then `sweep_best op= shape= space= valid= config= default=` (the knobs of the best and the
// default configs; space is the raw size of the config space, valid the number of configs that
// satisfy its constraints) and a final
//   sweep_summary dense_1024_ratio_best= resnet18_geomean_ratio_best= resnet18_geomean_ratio_default=
// The default config's output is checked against oneDNN's (a `sweep_warning` line when it differs).
// Layouts (packed outside the timed region for both sides) and the oneDNN peer are those of
// bench/common/layer.h: dense_pack.x86 takes its weight prepacked and oneDNN's matmul runs with the
// plain weight and with the layout it picks (the faster is the peer; peer_weights says which,
// onednn_plain_gflops is the plain run); the convolutions take blocked data and kernels and
// oneDNN picks its own blocked layouts (format any).
// Options: --configs N (default 500), --workloads SUBSTR[,SUBSTR...] (match on the template or
//          the shape), --seed S, --target "llvm -mcpu=...", --asm DIR (writes the assembly of
//          each workload's default config to DIR/<template>_<shape>.s, and
//          its lowered function to .ir).
#include <cblas.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "bench/common/layer.h"
#include "compiler/codegen/llvm/llvm_module.h"
#include "compiler/driver/target.h"
#include "compiler/ops/registry.h"
#include "deploy/thread_pool.h"

namespace {

using namespace kiln;
using bench::Layer;

double openblas_seconds(const Layer &wl, const bench::PlainInputs &p) {
  std::vector<float> c(static_cast<size_t>(wl.M * wl.Nn));
  return bench::time_call([&] {
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, static_cast<int>(wl.M), static_cast<int>(wl.Nn),
                static_cast<int>(wl.K), 1.0f, p.x.data(), static_cast<int>(wl.K), p.w.data(), static_cast<int>(wl.K),
                0.0f, c.data(), static_cast<int>(wl.Nn));
  });
}

// OpenBLAS picks its kernels from the CPU model at load time and falls back to SSE3 kernels on a
// CPU its release does not know; oneDNN's OpenMP runtime reads its thread count at load time. When
// either needs changing, the benchmark runs itself again with the environment set.
void set_environment(char **argv) {
  bool again = bench::set_onednn_single_thread_env();
  if (!std::getenv("OPENBLAS_CORETYPE")) {
    const std::string core = openblas_get_corename();
    if (core == "Prescott" || core == "Core2" || core == "Nehalem" || core == "Sandybridge") {
      const codegen::LLVMTarget host = codegen::LLVMTarget::host();
      const char *better = host.has_feature("avx512f") ? "SkylakeX" : host.has_feature("avx2") ? "Haswell" : nullptr;
      if (better) {
        std::fprintf(stderr, "OpenBLAS chose %s kernels for this CPU; running it with OPENBLAS_CORETYPE=%s\n",
                     core.c_str(), better);
        setenv("OPENBLAS_CORETYPE", better, 1);
        again = true;
      }
    }
  }
  if (again) execv("/proc/self/exe", argv);
}

std::vector<std::string> split_list(const std::string &s) {
  std::vector<std::string> r;
  size_t start = 0;
  while (start <= s.size()) {
    const size_t comma = s.find(',', start);
    const std::string item = s.substr(start, comma == std::string::npos ? std::string::npos : comma - start);
    if (!item.empty()) r.push_back(item);
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  return r;
}

std::string no_spaces(std::string s) {
  for (char &c : s) {
    if (c == ' ' || c == '\n' || c == '\t') c = ';';
  }
  return s;
}

}  // namespace

int main(int argc, char **argv) {
  set_environment(argv);
  int n_configs = 500;
  uint64_t seed = 1;
  std::string filter, asm_dir;
  std::string target = "llvm -mcpu=native";
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--configs" && i + 1 < argc) {
      n_configs = std::atoi(argv[++i]);
    } else if (a == "--workloads" && i + 1 < argc) {
      filter = argv[++i];
    } else if (a == "--seed" && i + 1 < argc) {
      seed = std::strtoull(argv[++i], nullptr, 10);
    } else if (a == "--target" && i + 1 < argc) {
      target = argv[++i];
    } else if (a == "--asm" && i + 1 < argc) {
      asm_dir = argv[++i];
    } else {
      std::fprintf(stderr,
                   "usage: %s [--configs N] [--workloads SUBSTR[,SUBSTR...]] [--seed S] [--target T] [--asm DIR]\n",
                   argv[0]);
      return 1;
    }
  }
  deploy::set_num_threads(1);
  openblas_set_num_threads(1);
  codegen::LLVMBuildOptions options;
  options.target = target;

  std::vector<Layer> workloads = {bench::dense_layer(1024, 1024, 1024)};
  for (int64_t m : {1, 16, 64}) {
    for (int64_t k : {512, 2048}) workloads.push_back(bench::dense_layer(m, 1000, k));
  }
  // The 12 distinct convolutions of ResNet-18 at batch 1.
  workloads.push_back(bench::conv_layer(3, 224, 64, 7, 2, 3));
  workloads.push_back(bench::conv_layer(64, 56, 64, 3, 1, 1));
  workloads.push_back(bench::conv_layer(64, 56, 64, 1, 1, 0));
  workloads.push_back(bench::conv_layer(64, 56, 128, 3, 2, 1));
  workloads.push_back(bench::conv_layer(64, 56, 128, 1, 2, 0));
  workloads.push_back(bench::conv_layer(128, 28, 128, 3, 1, 1));
  workloads.push_back(bench::conv_layer(128, 28, 256, 3, 2, 1));
  workloads.push_back(bench::conv_layer(128, 28, 256, 1, 2, 0));
  workloads.push_back(bench::conv_layer(256, 14, 256, 3, 1, 1));
  workloads.push_back(bench::conv_layer(256, 14, 512, 3, 2, 1));
  workloads.push_back(bench::conv_layer(256, 14, 512, 1, 2, 0));
  workloads.push_back(bench::conv_layer(512, 7, 512, 3, 1, 1));
  // SqueezeNet 1.1's stem: three input channels, stride 2, no padding, an odd output width (111).
  workloads.push_back(bench::conv_layer(3, 224, 64, 3, 2, 0));
  // MobileNet depthwise layers: stride 1 and stride 2.
  workloads.push_back(bench::conv_layer(32, 112, 32, 3, 1, 1, true));
  workloads.push_back(bench::conv_layer(128, 56, 128, 3, 2, 1, true));

  const std::vector<std::string> wanted = split_list(filter);
  double dense1024_ratio = NAN, log_best = 0, log_default = 0;
  int resnet_layers = 0;
  for (const Layer &wl : workloads) {
    if (!wanted.empty()) {
      bool match = false;
      for (const auto &w : wanted) {
        match = match || wl.tmpl.find(w) != std::string::npos || wl.shape.find(w) != std::string::npos;
      }
      if (!match) continue;
    }
    ops::Task task(wl.tmpl, bench::layer_args(wl), driver::resolve_target(target));
    const double flop = task.flop();

    const bench::PlainInputs p = bench::plain_inputs(wl, seed);

    bench::OneDnnResult peer = bench::onednn_run(wl, p);
    double openblas = wl.kind == Layer::Dense ? openblas_seconds(wl, p) : 0;

    // Prints a warning line when a config's output differs from oneDNN's.
    auto check = [&](const bench::KilnResult &m, const char *which) {
      double diff = 0, scale = 1;
      if (!bench::matches(m.out, peer.out, flop, &diff, &scale)) {
        std::printf("sweep_warning op=%s shape=%s %s config differs from oneDNN: max_abs_diff=%g max_abs=%g\n",
                    wl.tmpl.c_str(), wl.shape.c_str(), which, diff, scale);
      }
    };

    // The default config, checked against oneDNN's output.
    const autotune::Config def = task.default_config();
    if (!asm_dir.empty()) {
      const std::string path = asm_dir + "/" + wl.tmpl + "_" + wl.shape + ".s";
      const ir::LoweredFunc f = task.lower(def, "bench_layer");
      std::ofstream(path) << codegen::emit_assembly({f}, options);
      std::ofstream(asm_dir + "/" + wl.tmpl + "_" + wl.shape + ".ir") << f;
      std::printf("sweep_asm op=%s shape=%s path=%s\n", wl.tmpl.c_str(), wl.shape.c_str(), path.c_str());
    }
    const bench::KilnResult dm = bench::kiln_run(task, wl, def, p, options, true, 1e30);
    if (!dm.ok) {
      std::printf("sweep_warning op=%s shape=%s default config failed: %s\n", wl.tmpl.c_str(), wl.shape.c_str(),
                  no_spaces(dm.error).c_str());
    } else {
      check(dm, "default");
    }

    // Random configs, distinct, uniform over the valid ones.
    std::mt19937_64 rng(seed * 1000003 + std::hash<std::string>()(wl.tmpl + wl.shape));
    std::set<int64_t> seen;
    std::vector<autotune::Config> configs;
    for (int tries = 0; static_cast<int>(configs.size()) < n_configs && tries < 20 * n_configs + 100; ++tries) {
      autotune::Config c = task.space().sample(rng);
      if (seen.insert(c.index()).second) configs.push_back(c);
    }
    double best = dm.ok ? dm.seconds : 1e30;
    autotune::Config best_cfg = def;
    int measured = dm.ok ? 1 : 0, failed = dm.ok ? 0 : 1;
    std::string first_error;
    for (const auto &cfg : configs) {
      // A config whose first call is 4x slower than the best so far is recorded from that call.
      const bench::KilnResult m = bench::kiln_run(task, wl, cfg, p, options, false, 4 * best);
      if (!m.ok) {
        ++failed;
        if (first_error.empty()) first_error = m.error;
        continue;
      }
      ++measured;
      if (m.seconds < best) {
        best = m.seconds;
        best_cfg = cfg;
      }
    }
    // The peers, the default and the best config are timed a second time at the end and keep the
    // faster figure, so that a burst of load on the machine during one measurement does not
    // favour either side.
    const bench::OneDnnResult again = bench::onednn_run(wl, p);
    if (again.seconds < peer.seconds) {
      peer.seconds = again.seconds;
      peer.weights = again.weights;
    }
    peer.plain_seconds = std::min(peer.plain_seconds, again.plain_seconds);
    if (wl.kind == Layer::Dense) openblas = std::min(openblas, openblas_seconds(wl, p));
    double def_seconds = dm.ok ? dm.seconds : 0;
    if (dm.ok) {
      const bench::KilnResult again = bench::kiln_run(task, wl, def, p, options, false, 1e30);
      if (again.ok) def_seconds = std::min(def_seconds, again.seconds);
      if (def_seconds < best) {
        best = def_seconds;
        best_cfg = def;
      }
    }
    if (best_cfg != def) {
      const bench::KilnResult bm = bench::kiln_run(task, wl, best_cfg, p, options, true, 1e30);
      if (bm.ok) {
        check(bm, "best");
        best = std::min(best, bm.seconds);
      }
    }
    const double g_best = flop / best * 1e-9, g_def = dm.ok ? flop / def_seconds * 1e-9 : 0;
    const double g_peer = flop / peer.seconds * 1e-9;
    std::printf(
        "sweep op=%s shape=%s configs=%d failed=%d best_gflops=%.2f default_gflops=%.2f peer=onednn "
        "peer_gflops=%.2f",
        wl.tmpl.c_str(), wl.shape.c_str(), measured, failed, g_best, g_def, g_peer);
    if (wl.kind == Layer::Dense) {
      std::printf(" weights=prepacked peer_weights=%s onednn_plain_gflops=%.2f openblas_gflops=%.2f", peer.weights,
                  flop / peer.plain_seconds * 1e-9, flop / openblas * 1e-9);
    }
    std::printf(" ratio_best=%.3f ratio_default=%.3f\n", g_best / g_peer, g_def / g_peer);
    std::printf("sweep_best op=%s shape=%s space=%lld valid=%lld config=%s default=%s\n", wl.tmpl.c_str(),
                wl.shape.c_str(), static_cast<long long>(task.space().size()),
                static_cast<long long>(task.space().count_valid()), no_spaces(best_cfg.to_string()).c_str(),
                no_spaces(def.to_string()).c_str());
    if (!first_error.empty()) {
      std::printf("sweep_failure op=%s shape=%s first_error=%s\n", wl.tmpl.c_str(), wl.shape.c_str(),
                  no_spaces(first_error.substr(0, 200)).c_str());
    }
    std::fflush(stdout);
    if (wl.kind == Layer::Dense && wl.M == 1024) dense1024_ratio = g_best / g_peer;
    if (wl.kind == Layer::Conv) {
      log_best += std::log(g_best / g_peer);
      log_default += std::log(std::max(g_def, 1e-9) / g_peer);
      ++resnet_layers;
    }
  }
  const double gb = resnet_layers ? std::exp(log_best / resnet_layers) : NAN;
  const double gd = resnet_layers ? std::exp(log_default / resnet_layers) : NAN;
  std::printf(
      "sweep_summary dense_1024_ratio_best=%.3f resnet18_geomean_ratio_best=%.3f "
      "resnet18_geomean_ratio_default=%.3f resnet18_layers=%d configs_per_workload=%d\n",
      dense1024_ratio, gb, gd, resnet_layers, n_configs);
  return 0;
}
