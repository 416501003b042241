#include "deploy/vta/config.h"

#include <cstdio>
#include <regex>

#include "deploy/vta/isa.h"

namespace kiln::vta {

namespace {

void check_range(const char *name, int value, int lo, int hi) {
  if (value < lo || value > hi) {
    throw VtaConfigError(detail::concat("VTA config: ", name, " = ", value, " is out of range [", lo, ", ", hi, "]"));
  }
}

int log2_exact(int v, const std::string &what, const std::string &text) {
  int l = 0;
  while ((1 << l) < v && l < 30) ++l;
  if (v <= 0 || (1 << l) != v) {
    throw VtaConfigError(detail::concat("VTA model name '", text, "': ", what, " = ", v, " is not a power of two"));
  }
  return l;
}

}  // namespace

std::string VtaConfig::model_name() const {
  std::string name = detail::concat("sim_", batch(), "x", block(), "_i", inp_bits(), "w", wgt_bits(), "a", acc_bits());
  VtaConfig d;
  if (log_uop_buff_size != d.log_uop_buff_size || log_inp_buff_size != d.log_inp_buff_size ||
      log_wgt_buff_size != d.log_wgt_buff_size || log_acc_buff_size != d.log_acc_buff_size) {
    name +=
        detail::concat("_", log_uop_buff_size, "_", log_inp_buff_size, "_", log_wgt_buff_size, "_", log_acc_buff_size);
  }
  return name;
}

VtaConfig VtaConfig::parse(const std::string &name) {
  static const std::regex re(R"(sim_(\d+)x(\d+)_i(\d+)w(\d+)a(\d+)(?:_(\d+)_(\d+)_(\d+)_(\d+))?)");
  std::smatch m;
  if (!std::regex_match(name, m, re)) {
    throw VtaConfigError(detail::concat("VTA model name '", name,
                                        "' does not parse: expected sim_<batch>x<block>_i<bits>w<bits>a<bits>"
                                        "[_<uop>_<inp>_<wgt>_<acc>], e.g. sim_1x16_i8w8a32"));
  }
  auto num = [&](int i) {
    const std::string s = m[i].str();
    if (s.size() > 6) throw VtaConfigError(detail::concat("VTA model name '", name, "': number ", s, " is too large"));
    return std::stoi(s);
  };
  VtaConfig c;
  c.log_batch = log2_exact(num(1), "batch", name);
  c.log_block = log2_exact(num(2), "block", name);
  c.log_inp_width = log2_exact(num(3), "input bits", name);
  c.log_wgt_width = log2_exact(num(4), "weight bits", name);
  c.log_acc_width = log2_exact(num(5), "accumulator bits", name);
  if (m[6].matched) {
    c.log_uop_buff_size = num(6);
    c.log_inp_buff_size = num(7);
    c.log_wgt_buff_size = num(8);
    c.log_acc_buff_size = num(9);
  }
  c.validate();
  return c;
}

void VtaConfig::validate() const {
  check_range("log_inp_width", log_inp_width, 3, 5);
  check_range("log_wgt_width", log_wgt_width, 3, 5);
  check_range("log_acc_width", log_acc_width, 3, 5);
  if (log_acc_width < log_inp_width || log_acc_width < log_wgt_width) {
    throw VtaConfigError(detail::concat("VTA config: the accumulator (", acc_bits(),
                                        " bits) is narrower than the inputs (", inp_bits(), ") or weights (",
                                        wgt_bits(), ")"));
  }
  check_range("log_batch", log_batch, 0, 4);
  check_range("log_block", log_block, 1, 6);
  check_range("log_uop_buff_size", log_uop_buff_size, 2, 20);
  check_range("log_inp_buff_size", log_inp_buff_size, 4, 24);
  check_range("log_wgt_buff_size", log_wgt_buff_size, 4, 24);
  check_range("log_acc_buff_size", log_acc_buff_size, 4, 24);
  check_range("bus_width_bytes", bus_width_bytes, 1, 1 << 12);
  if ((bus_width_bytes & (bus_width_bytes - 1)) != 0) {
    throw VtaConfigError(detail::concat("VTA config: bus_width_bytes = ", bus_width_bytes, " is not a power of two"));
  }
  if (!(clock_mhz > 0.0 && clock_mhz < 1e6)) {
    throw VtaConfigError(detail::concat("VTA config: clock_mhz = ", clock_mhz, " must be positive"));
  }
  const struct {
    const char *name;
    int log_size;
    int elem;
  } buffers[] = {{"micro-op", log_uop_buff_size, kUopBytes},
                 {"input", log_inp_buff_size, inp_elem_bytes()},
                 {"weight", log_wgt_buff_size, wgt_elem_bytes()},
                 {"accumulator", log_acc_buff_size, acc_elem_bytes()}};
  for (const auto &b : buffers) {
    if ((1 << b.log_size) < b.elem) {
      throw VtaConfigError(detail::concat("VTA config: the ", b.name, " buffer (", 1 << b.log_size,
                                          " bytes) is smaller than one element (", b.elem, " bytes)"));
    }
  }
  (void)IsaLayout::from(*this);
}

bool VtaConfig::operator==(const VtaConfig &o) const {
  return log_inp_width == o.log_inp_width && log_wgt_width == o.log_wgt_width && log_acc_width == o.log_acc_width &&
         log_batch == o.log_batch && log_block == o.log_block && log_uop_buff_size == o.log_uop_buff_size &&
         log_inp_buff_size == o.log_inp_buff_size && log_wgt_buff_size == o.log_wgt_buff_size &&
         log_acc_buff_size == o.log_acc_buff_size && bus_width_bytes == o.bus_width_bytes && clock_mhz == o.clock_mhz;
}

}  // namespace kiln::vta
