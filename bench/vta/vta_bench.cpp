// One ResNet-18 layer (C2: 56x56, 64 -> 64, 3x3, pad 1, then >> 8 and clip to int8) built by hand
// through the VTA runtime and run on the simulator, with one and with two virtual threads over the
// output channels. Prints modelled cycles, GOPS at the modelled clock and GEMM-core utilisation.
// There is no peer to measure a simulator against; the reference design's published figures are
// printed beside ours instead (TVM, OSDI'18: utilisation 70% -> 88% with latency hiding on
// ResNet layers, 16x16 int8 core at 200 MHz, 102.4 GOPS peak).
//
//   vta_bench [--model sim_1x16_i8w8a32] [--clock-mhz 100] [--bus-bytes 8] [--tile-h 2] [--dump]
#include <cstdio>
#include <cstring>
#include <random>
#include <string>

#include "deploy/vta/conv2d_program.h"

using namespace kiln::vta;

int main(int argc, char **argv) {
  std::string model = "sim_1x16_i8w8a32";
  double clock = 100.0;
  int bus = 8, tile_h = 2;
  bool dump = false;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--model" && i + 1 < argc) {
      model = argv[++i];
    } else if (a == "--clock-mhz" && i + 1 < argc) {
      clock = std::stod(argv[++i]);
    } else if (a == "--bus-bytes" && i + 1 < argc) {
      bus = std::stoi(argv[++i]);
    } else if (a == "--tile-h" && i + 1 < argc) {
      tile_h = std::stoi(argv[++i]);
    } else if (a == "--dump") {
      dump = true;
    } else {
      std::fprintf(stderr, "usage: vta_bench [--model NAME] [--clock-mhz F] [--bus-bytes N] [--tile-h N] [--dump]\n");
      return 1;
    }
  }
  try {
    VtaConfig cfg = VtaConfig::parse(model);
    cfg.clock_mhz = clock;
    cfg.bus_width_bytes = bus;
    cfg.validate();
    const Conv2dLayer layer;
    std::mt19937 rng(1);
    std::vector<int8_t> input(static_cast<size_t>(layer.in_channels) * layer.height * layer.width);
    std::vector<int8_t> weight(static_cast<size_t>(layer.out_channels) * layer.in_channels * 9);
    for (auto &v : input) v = static_cast<int8_t>(static_cast<int>(rng() % 256) - 128);
    for (auto &v : weight) v = static_cast<int8_t>(static_cast<int>(rng() % 32) - 16);
    std::vector<int8_t> first;
    for (int nthread : {1, 2}) {
      Runtime rt(cfg);
      const Conv2dResult r = run_conv2d(rt, layer, Conv2dSchedule{tile_h, nthread}, input, weight);
      if (first.empty()) first = r.output;
      const SimCounters &c = r.counters;
      std::printf(
          "vta_conv2d model=%s layer=resnet18_c2 oc_nthread=%d tile_h=%d clock_mhz=%.0f bus_bytes=%d cycles=%llu "
          "gops=%.2f peak_gops=%.2f gemm_util=%.3f load_busy=%llu compute_busy=%llu store_busy=%llu "
          "gemm_counter=%llu alu_counter=%llu inp_load_nbytes=%llu wgt_load_nbytes=%llu out_store_nbytes=%llu "
          "uop_load_nbytes=%llu instructions=%llu same_output=%d\n",
          cfg.model_name().c_str(), nthread, tile_h, cfg.clock_mhz, cfg.bus_width_bytes,
          static_cast<unsigned long long>(c.total_cycles), c.gops(cfg), cfg.peak_gops(), c.gemm_utilization(),
          static_cast<unsigned long long>(c.load_busy_cycles), static_cast<unsigned long long>(c.compute_busy_cycles),
          static_cast<unsigned long long>(c.store_busy_cycles), static_cast<unsigned long long>(c.gemm_counter),
          static_cast<unsigned long long>(c.alu_counter), static_cast<unsigned long long>(c.inp_load_nbytes),
          static_cast<unsigned long long>(c.wgt_load_nbytes), static_cast<unsigned long long>(c.out_store_nbytes),
          static_cast<unsigned long long>(c.uop_load_nbytes), static_cast<unsigned long long>(c.instructions),
          r.output == first ? 1 : 0);
      if (dump) std::printf("%s", rt.dump_last().c_str());
    }
    std::printf(
        "vta_reference source=tvm_osdi18 layer=resnet18_convs core=1x16x16_i8 clock_mhz=200 peak_gops=102.4 "
        "gemm_util_without_latency_hiding=0.70 gemm_util_with_latency_hiding=0.88\n");
  } catch (const VtaError &e) {
    std::fprintf(stderr, "vta_bench: %s\n", e.what());
    return 1;
  }
  return 0;
}
