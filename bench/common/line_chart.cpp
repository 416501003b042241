#include "bench/common/line_chart.h"

#include <algorithm>
#include <cstdio>
#include <stdexcept>

namespace kiln::bench {

void write_small_multiples(const std::string &path, const std::vector<ChartPanel> &panels, const ChartOptions &o) {
  FILE *f = std::fopen(path.c_str(), "w");
  if (!f) throw std::runtime_error("cannot write " + path);
  const int pw = 300, ph = 220, cols = std::max(1, o.columns), margin = 40, top = 44;
  const int rows = static_cast<int>((panels.size() + cols - 1) / cols);
  const int width = cols * pw, height = rows * ph + top;
  auto color_of = [&](const std::string &series) {
    for (const auto &[name, c] : o.colors) {
      if (name == series) return c;
    }
    return std::string("#444444");
  };
  const double span = o.y_hi - o.y_lo;
  std::fprintf(f, "<svg xmlns='http://www.w3.org/2000/svg' width='%d' height='%d' font-family='sans-serif'>\n", width,
               height);
  std::fprintf(f, "<rect width='100%%' height='100%%' fill='white'/>\n");
  std::fprintf(f, "<text x='10' y='18' font-size='14'>%s</text>\n", o.title.c_str());
  int legend_x = 10;
  for (const auto &[name, c] : o.colors) {
    std::fprintf(f,
                 "<rect x='%d' y='29' width='14' height='4' fill='%s'/><text x='%d' y='35' font-size='11'>%s</text>\n",
                 legend_x, c.c_str(), legend_x + 18, name.c_str());
    legend_x += 30 + 7 * static_cast<int>(name.size());
  }
  for (size_t p = 0; p < panels.size(); ++p) {
    const ChartPanel &panel = panels[p];
    const int ox = static_cast<int>(p % cols) * pw, oy = top + static_cast<int>(p / cols) * ph;
    const int x0 = ox + margin, y0 = oy + ph - margin, w = pw - margin - 10, h = ph - margin - 30;
    std::fprintf(f, "<text x='%d' y='%d' font-size='12'>%s</text>\n", x0, oy + 14, panel.title.c_str());
    if (!panel.note.empty()) {
      std::fprintf(f, "<text x='%d' y='%d' font-size='9' fill='#555'>%s</text>\n", x0, oy + 26, panel.note.c_str());
    }
    std::fprintf(f, "<rect x='%d' y='%d' width='%d' height='%d' fill='none' stroke='#999'/>\n", x0, y0 - h, w, h);
    size_t points = 1;
    for (const ChartLine &l : panel.lines) points = std::max(points, l.y.size());
    for (double yv : o.y_ticks) {
      const double y = y0 - (yv - o.y_lo) / span * h;
      std::fprintf(f, "<text x='%d' y='%.1f' font-size='9' text-anchor='end'>%g</text>\n", x0 - 3, y + 3, yv);
    }
    if (o.reference >= o.y_lo && o.reference <= o.y_hi) {
      const double y = y0 - (o.reference - o.y_lo) / span * h;
      std::fprintf(f, "<line x1='%d' y1='%.1f' x2='%d' y2='%.1f' stroke='#999' stroke-dasharray='2,3'/>\n", x0, y,
                   x0 + w, y);
    }
    // x ticks: a round step that gives at most 6 of them.
    size_t step = 1;
    for (size_t s : {1, 2, 5, 10, 25, 50, 100, 200, 500, 1000, 2000, 5000}) {
      step = s;
      if (points / s <= 6) break;
    }
    for (size_t x = step; x <= points; x += step) {
      const double xp = x0 + static_cast<double>(x) / static_cast<double>(points) * w;
      std::fprintf(f, "<line x1='%.1f' y1='%d' x2='%.1f' y2='%d' stroke='#999'/>\n", xp, y0, xp, y0 + 3);
      if (static_cast<double>(points - x) > 1.2 * static_cast<double>(step)) {
        std::fprintf(f, "<text x='%.1f' y='%d' font-size='9' text-anchor='middle'>%zu</text>\n", xp, y0 + 12, x);
      }
    }
    std::fprintf(f, "<text x='%d' y='%d' font-size='9' text-anchor='end'>%zu %s</text>\n", x0 + w, y0 + 12, points,
                 o.x_label.c_str());
    for (const ChartLine &l : panel.lines) {
      std::fprintf(f, "<polyline fill='none' stroke-width='1.5' stroke='%s'%s points='", color_of(l.series).c_str(),
                   l.dashed ? " stroke-dasharray='5,3'" : "");
      for (size_t t = 0; t < l.y.size(); ++t) {
        const double x = x0 + static_cast<double>(t + 1) / static_cast<double>(points) * w;
        const double y = y0 - (std::min(o.y_hi, std::max(o.y_lo, l.y[t])) - o.y_lo) / span * h;
        std::fprintf(f, "%.1f,%.1f ", x, y);
      }
      std::fprintf(f, "'/>\n");
    }
  }
  std::fprintf(f, "</svg>\n");
  std::fclose(f);
}

}  // namespace kiln::bench
