#pragma once
// VtaConfig: the shape of a VTA-style int8 accelerator (the widths and depths of its GEMM core and
// on-chip buffers, the bus width and clock its cycle model uses). Every size the ISA, the simulator
// and the runtime depend on is derived here, so a change of configuration reaches all of them.
//
// The default is the reference design: a 1x16x16 int8 GEMM core with an int32 accumulator, a
// 32 KiB micro-op buffer, 32 KiB input, 256 KiB weight and 128 KiB accumulator buffers, a 64-bit
// bus at 100 MHz. Its canonical model name is `sim_1x16_i8w8a32`.
#include <cstdint>
#include <string>

#include "contracts/error.h"

namespace kiln::vta {

// Base of every error of the VTA device layer (configuration, ISA, simulator, runtime).
class VtaError : public UserError {
 public:
  using UserError::UserError;
};

// A configuration that cannot describe a device, or a model name that does not parse.
class VtaConfigError : public VtaError {
 public:
  using VtaError::VtaError;
};

struct VtaConfig {
  int log_inp_width = 3;       // input element bits = 1 << log_inp_width (8..32 bits: 3..5)
  int log_wgt_width = 3;       // weight element bits
  int log_acc_width = 5;       // accumulator bits (>= input and weight bits)
  int log_batch = 0;           // GEMM core rows
  int log_block = 4;           // GEMM core columns (BLOCK_IN = BLOCK_OUT)
  int log_uop_buff_size = 15;  // bytes, log2
  int log_inp_buff_size = 15;
  int log_wgt_buff_size = 18;
  int log_acc_buff_size = 17;
  int bus_width_bytes = 8;   // DMA bytes per cycle (the AXI bus width)
  double clock_mhz = 100.0;  // the cycle model's clock, for GOPS figures

  // Widths in bits. The output has the input's width.
  int inp_bits() const { return 1 << log_inp_width; }
  int wgt_bits() const { return 1 << log_wgt_width; }
  int acc_bits() const { return 1 << log_acc_width; }
  int out_bits() const { return inp_bits(); }
  int batch() const { return 1 << log_batch; }
  int block() const { return 1 << log_block; }

  // Bytes of one buffer element: INP/OUT/ACC hold batch x block values, WGT block x block, a
  // micro-op 4 bytes.
  int inp_elem_bytes() const { return batch() * block() * inp_bits() / 8; }
  int wgt_elem_bytes() const { return block() * block() * wgt_bits() / 8; }
  int acc_elem_bytes() const { return batch() * block() * acc_bits() / 8; }
  int out_elem_bytes() const { return batch() * block() * out_bits() / 8; }
  static constexpr int kUopBytes = 4;
  static constexpr int kInsnBytes = 16;

  // Buffer depths in elements (the OUT buffer has the accumulator's depth).
  int uop_depth() const { return (1 << log_uop_buff_size) / kUopBytes; }
  int inp_depth() const { return (1 << log_inp_buff_size) / inp_elem_bytes(); }
  int wgt_depth() const { return (1 << log_wgt_buff_size) / wgt_elem_bytes(); }
  int acc_depth() const { return (1 << log_acc_buff_size) / acc_elem_bytes(); }
  int out_depth() const { return acc_depth(); }

  // Multiply-accumulates of one GEMM micro-op (256 for the default).
  int64_t macs_per_uop() const { return int64_t{batch()} * block() * block(); }
  // Peak GOPS at clock_mhz: one micro-op per cycle, two operations per MAC.
  double peak_gops() const { return 2.0 * static_cast<double>(macs_per_uop()) * clock_mhz / 1000.0; }

  // The canonical model name: `sim_<batch>x<block>_i<inp>w<wgt>a<acc>`, followed by
  // `_<uop>_<inp>_<wgt>_<acc>` (log2 buffer bytes) when the buffer sizes are not the default ones.
  // The bus width and clock are cycle-model parameters and are not part of the name.
  std::string model_name() const;
  // Parses a model name (either form); throws VtaConfigError naming the text. The result is
  // validated.
  static VtaConfig parse(const std::string &name);
  // Throws VtaConfigError unless every field is in range and the instruction and micro-op layouts
  // derived from it fit in 128 and 32 bits.
  void validate() const;

  bool operator==(const VtaConfig &o) const;
  bool operator!=(const VtaConfig &o) const { return !(*this == o); }
};

}  // namespace kiln::vta
