// ONNX's backend node tests (Debian's libonnx-testdata: node/<test>/model.onnx and
// test_data_set_*/{input,output}_N.pb) through Kiln: every test whose ops all have a converter is
// imported, run by the reference executor and compared like ONNX's runner does (same dtype and
// shape; |got - want| <= atol + rtol * |want| with rtol 1e-3, atol 1e-7; integers and bools exactly;
// NaN matches NaN). Each test runs in a child process with a time limit, so a crash or a hang is a
// failure of that test, not of the run.
//
// Usage: onnx_node_tests [--data DIR] [--expected FILE] [--filter SUBSTRING] [--verbose] [--jobs N]
// Prints the counts; exits 1 when a test fails that the expected-failure list does not name, when a
// listed test passes (the list is stale), or when fewer than 95 % of the supported tests pass.
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "compiler/driver/graph_executor.h"
#include "compiler/frontend/onnx/onnx_importer.h"
#include "compiler/ir/float16.h"

namespace fs = std::filesystem;
using namespace kiln;

namespace {

#ifndef KILN_ONNX_NODE_TEST_DIR
#define KILN_ONNX_NODE_TEST_DIR ""
#endif
#ifndef KILN_NODE_TEST_EXPECTED
#define KILN_NODE_TEST_EXPECTED ""
#endif

double element(const deploy::Tensor &t, int64_t i) {
  const auto dt = t.dtype();
  const void *p = t.data();
  switch (dt.code) {
    case deploy::DType::Float:
      if (dt.bits == 32) return static_cast<const float *>(p)[i];
      if (dt.bits == 64) return static_cast<const double *>(p)[i];
      return ir::half_to_float(static_cast<const uint16_t *>(p)[i]);
    case deploy::DType::Int:
      if (dt.bits == 8) return static_cast<const int8_t *>(p)[i];
      if (dt.bits == 16) return static_cast<const int16_t *>(p)[i];
      if (dt.bits == 32) return static_cast<const int32_t *>(p)[i];
      return static_cast<double>(static_cast<const int64_t *>(p)[i]);
    case deploy::DType::UInt:
      if (dt.bits <= 8) return static_cast<const uint8_t *>(p)[i];
      if (dt.bits == 16) return static_cast<const uint16_t *>(p)[i];
      if (dt.bits == 32) return static_cast<const uint32_t *>(p)[i];
      return static_cast<double>(static_cast<const uint64_t *>(p)[i]);
  }
  return 0;
}

// Empty when they match; else why not.
std::string compare(const deploy::Tensor &got, const deploy::Tensor &want, const std::string &name) {
  if (got.dtype() != want.dtype())
    return name + ": dtype " + got.dtype().to_string() + ", expected " + want.dtype().to_string();
  if (got.shape() != want.shape()) {
    auto s = [](const std::vector<int64_t> &v) {
      std::string r = "[";
      for (size_t k = 0; k < v.size(); ++k) r += (k ? "," : "") + std::to_string(v[k]);
      return r + "]";
    };
    return name + ": shape " + s(got.shape()) + ", expected " + s(want.shape());
  }
  const bool is_float = want.dtype().code == deploy::DType::Float;
  int64_t bad = 0, first = -1;
  for (int64_t i = 0; i < want.numel(); ++i) {
    const double g = element(got, i), w = element(want, i);
    bool ok;
    if (!is_float)
      ok = g == w;
    else if (std::isnan(w))
      ok = std::isnan(g);
    else if (std::isinf(w))
      ok = g == w;
    else
      ok = std::fabs(g - w) <= 1e-7 + 1e-3 * std::fabs(w);
    if (!ok) {
      if (first < 0) first = i;
      ++bad;
    }
  }
  if (!bad) return "";
  std::ostringstream os;
  os << name << ": " << bad << " of " << want.numel() << " elements differ; first at " << first << ": got "
     << element(got, first) << ", expected " << element(want, first);
  return os.str();
}

std::vector<std::string> numbered(const fs::path &dir, const std::string &prefix) {
  std::vector<std::string> files;
  for (int i = 0;; ++i) {
    fs::path p = dir / (prefix + std::to_string(i) + ".pb");
    if (!fs::exists(p)) break;
    files.push_back(p.string());
  }
  return files;
}

// Runs one test in this process. Returns "" on success, "UNSUPPORTED: ..." when an op has no
// converter, else the failure.
std::string run_one(const fs::path &dir) {
  const std::string model = (dir / "model.onnx").string();
  frontend::onnx::ModelInfo info = frontend::onnx::inspect_model(model);
  if (!info.unsupported.empty()) {
    std::string ops;
    for (const auto &u : info.unsupported)
      ops += (ops.empty() ? "" : ",") + (u.domain.empty() ? "" : u.domain + ".") + u.op_type;
    return "UNSUPPORTED: " + ops;
  }
  if (info.opset > frontend::onnx::kMaxOpset) return "UNSUPPORTED: opset " + std::to_string(info.opset);
  for (const auto &io : info.inputs) {
    if (io.dtype == "non-tensor") return "UNSUPPORTED: sequence or optional inputs";
  }
  std::vector<fs::path> sets;
  for (const auto &e : fs::directory_iterator(dir)) {
    if (e.is_directory() && e.path().filename().string().rfind("test_data_set_", 0) == 0) sets.push_back(e.path());
  }
  std::sort(sets.begin(), sets.end());
  if (sets.empty()) return "no test data";
  // The input shapes of the first data set fix any symbolic dimension.
  frontend::onnx::ImportOptions opt;
  std::vector<deploy::Tensor> inputs;
  for (const auto &f : numbered(sets[0], "input_")) inputs.push_back(frontend::onnx::read_tensor_file(f));
  for (size_t i = 0; i < inputs.size() && i < info.inputs.size(); ++i)
    opt.input_shapes[info.inputs[i].name] = inputs[i].shape();
  // Inputs that set a shape, an axis or a size must be known at compile time: freeze the ones the
  // importer asks for to the data set's values (what a Kiln user does with --const-input).
  std::map<std::string, deploy::Tensor> first_inputs;
  for (size_t i = 0; i < inputs.size() && i < info.inputs.size(); ++i) first_inputs[info.inputs[i].name] = inputs[i];
  graph::Graph g;
  for (int attempt = 0;; ++attempt) {
    try {
      g = frontend::onnx::import_model(model, opt);
      break;
    } catch (const UserError &e) {
      const std::string msg = e.what();
      const auto tail = msg.find("') must be a constant");
      const auto head = tail == std::string::npos ? tail : msg.rfind("('", tail);
      if (attempt > 8 || head == std::string::npos) throw;
      const std::string name = msg.substr(head + 2, tail - head - 2);
      if (first_inputs.count(name) && !opt.frozen_inputs.count(name)) {
        opt.frozen_inputs[name] = first_inputs[name];
        opt.input_shapes.erase(name);
        continue;
      }
      // A value computed from inputs: freeze every integer input once.
      bool more = false;
      for (const auto &[n, t] : first_inputs) {
        if (t.dtype().code != deploy::DType::Float && !opt.frozen_inputs.count(n)) {
          opt.frozen_inputs[n] = t;
          opt.input_shapes.erase(n);
          more = true;
        }
      }
      if (!more) throw;
    }
  }
  driver::GraphExecutor ex(std::move(g));
  for (const auto &set : sets) {
    std::vector<deploy::Tensor> in;
    for (const auto &f : numbered(set, "input_")) in.push_back(frontend::onnx::read_tensor_file(f));
    std::vector<std::string> want_files = numbered(set, "output_");
    // Inputs that the model reads are the graph's inputs; the data set may list optional ones the
    // graph pruned away.
    std::map<std::string, deploy::Tensor> by_name;
    for (size_t i = 0; i < in.size() && i < info.inputs.size(); ++i) by_name[info.inputs[i].name] = in[i];
    std::map<std::string, deploy::Tensor> used;
    for (graph::ValueId id : ex.graph().inputs()) {
      const auto &name = ex.graph().value(id).name;
      if (!by_name.count(name)) return "no data for input " + name;
      used[name] = by_name[name];
    }
    std::vector<deploy::Tensor> got = ex.run(used);
    if (got.size() != want_files.size())
      return "the graph has " + std::to_string(got.size()) + " outputs, the data " + std::to_string(want_files.size());
    for (size_t o = 0; o < got.size(); ++o) {
      deploy::Tensor want = frontend::onnx::read_tensor_file(want_files[o]);
      std::string diff = compare(got[o], want, "output " + std::to_string(o));
      if (!diff.empty()) return set.filename().string() + " " + diff;
    }
  }
  return "";
}

// Runs one test in a child process with a time limit.
std::string run_isolated(const fs::path &dir, int timeout_s) {
  int fds[2];
  if (pipe(fds) != 0) return "pipe failed";
  pid_t pid = fork();
  if (pid == 0) {
    close(fds[0]);
    alarm(static_cast<unsigned>(timeout_s));
    std::string r;
    try {
      r = run_one(dir);
    } catch (const UserError &e) {
      r = std::string("error: ") + e.what();
    } catch (const std::exception &e) {
      r = std::string("internal error: ") + e.what();
    }
    if (r.empty()) r = "PASS";
    if (write(fds[1], r.data(), r.size()) < 0) _exit(3);
    _exit(0);
  }
  close(fds[1]);
  std::string out;
  char buf[4096];
  ssize_t k;
  while ((k = read(fds[0], buf, sizeof buf)) > 0) out.append(buf, static_cast<size_t>(k));
  close(fds[0]);
  int status = 0;
  waitpid(pid, &status, 0);
  if (WIFSIGNALED(status)) {
    const int sig = WTERMSIG(status);
    return sig == SIGALRM ? "timed out" : std::string("crashed: signal ") + strsignal(sig);
  }
  if (out == "PASS") return "";
  if (out.empty()) return "the child exited without a result";
  // One line.
  std::replace(out.begin(), out.end(), '\n', ' ');
  return out;
}

std::map<std::string, std::string> read_expected(const std::string &path) {
  std::map<std::string, std::string> m;
  if (path.empty()) return m;
  std::ifstream f(path);
  std::string line;
  while (std::getline(f, line)) {
    if (line.empty() || line[0] == '#') continue;
    std::istringstream is(line);
    std::string name;
    is >> name;
    std::string reason;
    std::getline(is, reason);
    const auto p = reason.find('#');
    m[name] = p == std::string::npos ? reason : reason.substr(p + 1);
  }
  return m;
}

}  // namespace

int main(int argc, char **argv) {
  std::string data = KILN_ONNX_NODE_TEST_DIR, expected_file = KILN_NODE_TEST_EXPECTED, filter;
  bool verbose = false;
  int jobs = 2, timeout_s = 120;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    auto next = [&]() -> std::string {
      if (i + 1 >= argc) {
        std::cerr << a << " needs a value\n";
        std::exit(2);
      }
      return argv[++i];
    };
    if (a == "--data")
      data = next();
    else if (a == "--expected")
      expected_file = next();
    else if (a == "--filter")
      filter = next();
    else if (a == "--verbose" || a == "-v")
      verbose = true;
    else if (a == "--jobs")
      jobs = std::max(1, std::stoi(next()));
    else if (a == "--timeout")
      timeout_s = std::stoi(next());
    else {
      std::cerr << "usage: onnx_node_tests [--data DIR] [--expected FILE] [--filter S] [--verbose] [--jobs N]\n";
      return 2;
    }
  }
  if (data.empty() || !fs::is_directory(data)) {
    std::cout << "SKIP: the ONNX node tests are not installed (Debian package libonnx-testdata)\n";
    return 0;
  }
  std::vector<fs::path> dirs;
  for (const auto &e : fs::directory_iterator(data)) {
    if (e.is_directory() && e.path().filename().string().find(filter) != std::string::npos) dirs.push_back(e.path());
  }
  std::sort(dirs.begin(), dirs.end());
  const auto expected = read_expected(expected_file);
  const auto t0 = std::chrono::steady_clock::now();

  std::vector<std::string> result(dirs.size());
  // `jobs` worker processes each take an interleaved share of the tests, one child per test.
  std::vector<int> pipes;
  std::vector<pid_t> workers;
  for (int w = 0; w < jobs; ++w) {
    int fds[2];
    if (pipe(fds) != 0) return 2;
    pid_t pid = fork();
    if (pid == 0) {
      close(fds[0]);
      for (size_t k = static_cast<size_t>(w); k < dirs.size(); k += static_cast<size_t>(jobs)) {
        std::string r = run_isolated(dirs[k], timeout_s);
        std::string line = std::to_string(k) + "\t" + r + "\n";
        if (write(fds[1], line.data(), line.size()) < 0) _exit(3);
      }
      _exit(0);
    }
    close(fds[1]);
    pipes.push_back(fds[0]);
    workers.push_back(pid);
  }
  for (int fd : pipes) {
    std::string all;
    char buf[65536];
    ssize_t k;
    while ((k = read(fd, buf, sizeof buf)) > 0) all.append(buf, static_cast<size_t>(k));
    close(fd);
    std::istringstream is(all);
    std::string line;
    while (std::getline(is, line)) {
      const auto tab = line.find('\t');
      const size_t idx = std::stoul(line.substr(0, tab));
      result[idx] = line.substr(tab + 1);
    }
  }
  for (pid_t p : workers) waitpid(p, nullptr, 0);

  int total = static_cast<int>(dirs.size()), supported = 0, passed = 0, expected_fail = 0;
  std::vector<std::string> unexpected, stale;
  std::map<std::string, int> unsupported_ops;
  for (size_t k = 0; k < dirs.size(); ++k) {
    const std::string name = dirs[k].filename().string();
    const std::string &r = result[k];
    if (r.rfind("UNSUPPORTED: ", 0) == 0) {
      std::istringstream is(r.substr(13));
      std::string op;
      while (std::getline(is, op, ',')) ++unsupported_ops[op];
      if (verbose) std::cout << "unsupported " << name << ": " << r.substr(13) << "\n";
      continue;
    }
    ++supported;
    const bool listed = expected.count(name) != 0;
    if (r.empty()) {
      ++passed;
      if (listed) stale.push_back(name);
      if (verbose) std::cout << "pass " << name << "\n";
    } else {
      if (listed)
        ++expected_fail;
      else
        unexpected.push_back(name + ": " + r);
      if (verbose || !listed) std::cout << "FAIL " << name << ": " << r << "\n";
    }
  }
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  const double pass_rate = supported ? 100.0 * passed / supported : 0;
  const double coverage = total ? 100.0 * supported / total : 0;
  std::printf(
      "node tests: %d directories, %d with every op supported (%.1f %%), %d pass (%.1f %% of supported), "
      "%d expected failures, %d unexpected failures, %.0f s\n",
      total, supported, coverage, passed, pass_rate, expected_fail, static_cast<int>(unexpected.size()), secs);
  if (verbose) {
    std::vector<std::pair<int, std::string>> ops;
    for (const auto &[op, c] : unsupported_ops) ops.push_back({c, op});
    std::sort(ops.rbegin(), ops.rend());
    std::cout << "unsupported op types by test count:";
    for (const auto &[c, op] : ops) std::cout << " " << op << "(" << c << ")";
    std::cout << "\n";
  }
  int rc = 0;
  for (const auto &u : unexpected) {
    std::cout << "unexpected failure: " << u << "\n";
    rc = 1;
  }
  for (const auto &s : stale) {
    std::cout << "listed as an expected failure but passes (remove it from the list): " << s << "\n";
    rc = 1;
  }
  if (filter.empty() && pass_rate < 95.0) {
    std::cout << "the pass rate is below 95 %\n";
    rc = 1;
  }
  return rc;
}
