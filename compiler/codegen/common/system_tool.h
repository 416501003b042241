#pragma once
// Running the system's C compiler or linker, as the back ends do to build a shared library.
#include <string>
#include <vector>

namespace kiln::codegen {

struct ToolRun {
  int status = 0;      // std::system's status: 0 when the tool succeeded
  std::string output;  // what it printed, standard output and error together
};

// Runs `argv` (argv[0] found on PATH; no word is interpreted by a shell), its output captured in
// `log_path`, and returns the status and the output.
ToolRun run_system_tool(const std::vector<std::string> &argv, const std::string &log_path);

}  // namespace kiln::codegen
