#include "compiler/codegen/common/system_tool.h"

#include <cstdlib>
#include <fstream>
#include <sstream>

namespace kiln::codegen {

namespace {

// One shell word, whatever it holds.
std::string shell_quote(const std::string &s) {
  std::string out = "'";
  for (char c : s) {
    if (c == '\'') {
      out += "'\\''";
    } else {
      out += c;
    }
  }
  return out + "'";
}

}  // namespace

ToolRun run_system_tool(const std::vector<std::string> &argv, const std::string &log_path) {
  std::string cmd;
  for (const std::string &word : argv) cmd += (cmd.empty() ? "" : " ") + shell_quote(word);
  cmd += " > " + shell_quote(log_path) + " 2>&1";
  ToolRun run;
  run.status = std::system(cmd.c_str());
  std::ifstream in(log_path);
  std::ostringstream os;
  os << in.rdbuf();
  run.output = os.str();
  return run;
}

}  // namespace kiln::codegen
