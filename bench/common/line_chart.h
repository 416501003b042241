#pragma once
// Small multiples as an SVG picture: one panel per case (a workload), one line per series (a
// strategy), y against x = 1, 2, ... (trials). The benchmarks draw their tuning curves with it.
#include <string>
#include <utility>
#include <vector>

namespace kiln::bench {

struct ChartLine {
  std::string series;     // names the colour and the legend entry
  std::vector<double> y;  // y[i] is drawn at x = i + 1
  bool dashed = false;
};

struct ChartPanel {
  std::string title;
  std::vector<ChartLine> lines;
  std::string note;  // a second line under the title, may be empty
};

struct ChartOptions {
  std::string title;
  std::string x_label = "trials";
  double y_lo = 0.7, y_hi = 1.0;  // values below y_lo are drawn at y_lo
  std::vector<double> y_ticks = {0.7, 0.8, 0.9, 1.0};
  double reference = -1;  // a dotted horizontal line at this y when y_lo <= it <= y_hi
  // series -> colour, in legend order
  std::vector<std::pair<std::string, std::string>> colors;
  int columns = 3;
};

// Writes the picture; throws std::runtime_error when the file cannot be written.
void write_small_multiples(const std::string &path, const std::vector<ChartPanel> &panels, const ChartOptions &options);

}  // namespace kiln::bench
