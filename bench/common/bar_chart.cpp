#include "bench/common/bar_chart.h"

#include <algorithm>
#include <cstdio>
#include <stdexcept>

namespace kiln::bench {

void write_bar_chart(const std::string &path, const std::vector<BarRow> &rows, const BarOptions &o) {
  FILE *f = std::fopen(path.c_str(), "w");
  if (!f) throw std::runtime_error("cannot write " + path);
  const int bar = 9, gap = 8, label_w = 230, plot_w = 420, note_w = 150, top = 56, bottom = 40;
  const int per_row = static_cast<int>(std::max<size_t>(1, o.series.size())) * bar + gap;
  const int width = label_w + plot_w + note_w, height = top + static_cast<int>(rows.size()) * per_row + bottom;
  const int x0 = label_w, y0 = top;
  auto xpos = [&](double v) { return x0 + std::clamp(v, 0.0, o.x_hi) / o.x_hi * plot_w; };
  std::fprintf(f, "<svg xmlns='http://www.w3.org/2000/svg' width='%d' height='%d' font-family='sans-serif'>\n", width,
               height);
  std::fprintf(f, "<rect width='100%%' height='100%%' fill='white'/>\n");
  std::fprintf(f, "<text x='10' y='18' font-size='14'>%s</text>\n", o.title.c_str());
  int legend_x = 10;
  for (const auto &[name, c] : o.series) {
    std::fprintf(f, "<rect x='%d' y='30' width='14' height='8' fill='%s'/><text x='%d' y='38' font-size='11'>%s</text>\n",
                 legend_x, c.c_str(), legend_x + 18, name.c_str());
    legend_x += 34 + 7 * static_cast<int>(name.size());
  }
  bool any_marker = false;
  for (const BarRow &r : rows) {
    for (double m : r.markers) any_marker = any_marker || m >= 0;
  }
  if (any_marker && !o.marker_label.empty()) {
    std::fprintf(f, "<rect x='%d' y='29' width='3' height='10' fill='black'/><text x='%d' y='38' font-size='11'>%s</text>\n",
                 legend_x + 5, legend_x + 14, o.marker_label.c_str());
  }
  const int plot_h = static_cast<int>(rows.size()) * per_row;
  for (double t : o.x_ticks) {
    const double x = xpos(t);
    std::fprintf(f, "<line x1='%.1f' y1='%d' x2='%.1f' y2='%d' stroke='#ddd'/>\n", x, y0, x, y0 + plot_h);
    std::fprintf(f, "<text x='%.1f' y='%d' font-size='9' text-anchor='middle'>%g</text>\n", x, y0 + plot_h + 12, t);
  }
  std::fprintf(f, "<text x='%.1f' y='%d' font-size='10' text-anchor='middle'>%s</text>\n", x0 + plot_w / 2.0,
               y0 + plot_h + 26, o.x_label.c_str());
  for (size_t i = 0; i < rows.size(); ++i) {
    const BarRow &r = rows[i];
    const int ry = y0 + static_cast<int>(i) * per_row;
    std::fprintf(f, "<text x='%d' y='%d' font-size='10' text-anchor='end'>%s</text>\n", x0 - 6,
                 ry + (per_row - gap) / 2 + 4, r.label.c_str());
    for (size_t s = 0; s < r.values.size() && s < std::max<size_t>(1, o.series.size()); ++s) {
      const int by = ry + static_cast<int>(s) * bar;
      const std::string color = s < o.series.size() ? o.series[s].second : "#4477aa";
      if (r.values[s] >= 0) {
        std::fprintf(f, "<rect x='%d' y='%d' width='%.1f' height='%d' fill='%s'/>\n", x0, by, xpos(r.values[s]) - x0,
                     bar - 1, color.c_str());
      }
      if (s < r.markers.size() && r.markers[s] >= 0) {
        std::fprintf(f, "<rect x='%.1f' y='%d' width='3' height='%d' fill='black'/>\n", xpos(r.markers[s]) - 1.5, by,
                     bar - 1);
      }
      if (s < r.notes.size() && !r.notes[s].empty()) {
        std::fprintf(f, "<text x='%d' y='%d' font-size='8' fill='#333'>%s</text>\n", x0 + plot_w + 6, by + bar - 2,
                     r.notes[s].c_str());
      }
    }
  }
  if (o.goal >= 0 && o.goal <= o.x_hi) {
    const double x = xpos(o.goal);
    std::fprintf(f, "<line x1='%.1f' y1='%d' x2='%.1f' y2='%d' stroke='#cc3311' stroke-dasharray='4,3'/>\n", x, y0 - 6,
                 x, y0 + plot_h);
    std::fprintf(f, "<text x='%.1f' y='%d' font-size='9' fill='#cc3311' text-anchor='middle'>%s</text>\n", x, y0 - 9,
                 o.goal_label.c_str());
  }
  std::fprintf(f, "<rect x='%d' y='%d' width='%d' height='%d' fill='none' stroke='#999'/>\n", x0, y0, plot_w, plot_h);
  std::fprintf(f, "</svg>\n");
  if (std::fclose(f) != 0) throw std::runtime_error("cannot write " + path);
}

}  // namespace kiln::bench
