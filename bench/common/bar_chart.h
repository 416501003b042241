#pragma once
// Grouped horizontal bars as an SVG picture: one row per case, one bar per series (a thread count,
// say), an optional marker per bar (a bound the bar cannot pass) and a dashed vertical line at a
// goal. ops_bench draws each case's fraction of the copy roofline with it.
#include <string>
#include <utility>
#include <vector>

namespace kiln::bench {

struct BarRow {
  std::string label;            // the case, left of its bars
  std::vector<double> values;   // values[i] belongs to series i; a negative value draws no bar
  std::vector<double> markers;  // markers[i] (if present and not negative) is drawn on bar i's line
  std::vector<std::string> notes;  // notes[i] (if present) is written right of bar i
};

struct BarOptions {
  std::string title;
  std::string x_label;
  double x_hi = 1.2;  // values past it are drawn at it
  std::vector<double> x_ticks = {0, 0.2, 0.4, 0.6, 0.8, 1.0, 1.2};
  double goal = -1;   // a dashed vertical line at this x when 0 <= it <= x_hi
  std::string goal_label;
  std::string marker_label;  // the legend entry of the markers, when any row has one
  // series -> colour, in legend order
  std::vector<std::pair<std::string, std::string>> series;
};

// Writes the picture; throws std::runtime_error when the file cannot be written.
void write_bar_chart(const std::string &path, const std::vector<BarRow> &rows, const BarOptions &options);

}  // namespace kiln::bench
