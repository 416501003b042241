#include "tuner/curves.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <sstream>

#include "compiler/driver/target.h"
#include "compiler/ops/registry.h"
#include "contracts/json.h"
#include "tuner/tuner.h"

namespace kiln::tuner {

std::vector<Curve> job_curves(db::TuningDb &log, int64_t job_id) {
  const std::optional<db::Job> job = log.job(job_id);
  if (!job) throw TuneError("there is no tuning job " + std::to_string(job_id) + " in " + log.path());
  const contracts::Json spec = contracts::Json::parse(job->spec.dump());
  const ops::Target target = driver::resolve_target(spec.at("target").as_string());

  std::vector<Curve> curves;
  std::map<std::string, size_t> by_key;
  std::map<std::string, std::string> default_index;  // workload key -> default config's knobs text
  for (const contracts::Json &t : spec.at("tasks").as_array()) {
    const ops::Task task(t.at("template").as_string(), t.at("args"), target);
    Curve c;
    c.name = t.get_or("name", "").as_string();
    if (c.name.empty()) c.name = task.templ().name;
    by_key[task.key()] = curves.size();
    default_index[task.key()] = task.default_config().record().knobs_json();
    curves.push_back(c);
  }
  std::vector<double> best(curves.size(), 0);
  db::ExportFilter filter;
  log.for_each_record(filter, [&](const db::Record &r) {
    if (!r.job_id || *r.job_id != job_id) return;
    auto it = by_key.find(r.workload.key);
    if (it == by_key.end()) return;
    Curve &c = curves[it->second];
    const double gflops = r.valid() && r.mean() > 0 ? r.workload.flop / r.mean() / 1e9 : 0;
    best[it->second] = std::max(best[it->second], gflops);
    c.best_gflops.push_back(best[it->second]);
    if (r.config.knobs_json() == default_index[r.workload.key]) c.default_gflops = gflops;
  });
  return curves;
}

namespace {

std::string xml_escape(const std::string &text) {
  std::string out;
  for (char ch : text) {
    switch (ch) {
      case '&':
        out += "&amp;";
        break;
      case '<':
        out += "&lt;";
        break;
      case '>':
        out += "&gt;";
        break;
      case '\'':
        out += "&apos;";
        break;
      case '"':
        out += "&quot;";
        break;
      default:
        out += ch;
    }
  }
  return out;
}

}  // namespace

std::string curves_svg(const std::vector<Curve> &curves, const std::string &title) {
  const int pw = 320, ph = 220, cols = 3, left = 48, bottom = 30, top = 26;
  const int n = static_cast<int>(curves.size());
  const int rows = std::max(1, (n + cols - 1) / cols);
  const int width = std::min(n, cols) * pw + 10, height = rows * ph + 40;
  std::ostringstream s;
  s.setf(std::ios::fixed);
  s.precision(1);
  s << "<svg xmlns='http://www.w3.org/2000/svg' width='" << std::max(width, 340) << "' height='" << height
    << "' font-family='sans-serif'>\n<rect width='100%' height='100%' fill='white'/>\n";
  s << "<text x='10' y='22' font-size='14'>" << xml_escape(title) << "</text>\n";
  for (int p = 0; p < n; ++p) {
    const Curve &c = curves[static_cast<size_t>(p)];
    const int ox = (p % cols) * pw, oy = 36 + (p / cols) * ph;
    const int x0 = ox + left, y0 = oy + ph - bottom, w = pw - left - 12, h = ph - bottom - top;
    double ymax = c.default_gflops;
    for (double v : c.best_gflops) ymax = std::max(ymax, v);
    ymax = ymax > 0 ? ymax * 1.08 : 1;
    const size_t trials = std::max<size_t>(1, c.best_gflops.size());
    s << "<text x='" << x0 << "' y='" << oy + 16 << "' font-size='12'>" << xml_escape(c.name) << "</text>\n";
    s << "<rect x='" << x0 << "' y='" << y0 - h << "' width='" << w << "' height='" << h
      << "' fill='none' stroke='#999'/>\n";
    for (int k = 0; k <= 4; ++k) {
      const double v = ymax * k / 4, y = y0 - h * k / 4.0;
      s << "<text x='" << x0 - 4 << "' y='" << y + 3 << "' font-size='9' text-anchor='end'>" << v << "</text>\n";
    }
    s << "<text x='" << x0 + w << "' y='" << y0 + 14 << "' font-size='9' text-anchor='end'>" << trials
      << " trials</text>\n";
    if (c.default_gflops > 0) {
      const double y = y0 - c.default_gflops / ymax * h;
      s << "<line x1='" << x0 << "' y1='" << y << "' x2='" << x0 + w << "' y2='" << y
        << "' stroke='#b2182b' stroke-dasharray='4 3'/>\n";
    }
    s << "<polyline fill='none' stroke='#2166ac' stroke-width='1.5' points='";
    for (size_t t = 0; t < c.best_gflops.size(); ++t) {
      s << x0 + static_cast<double>(t + 1) / trials * w << "," << y0 - c.best_gflops[t] / ymax * h << " ";
    }
    s << "'/>\n";
  }
  s << "<text x='10' y='" << height - 6
    << "' font-size='10'>blue: best found so far; dashed red: the template's default config</text>\n";
  s << "</svg>\n";
  return s.str();
}

}  // namespace kiln::tuner
