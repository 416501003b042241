#pragma once
// `kiln templates`: the operator templates, each with a one-line description and its arguments.
// `kiln templates show T`: one template's arguments (types, defaults), the epilogue format, the
// knobs of its config space for given arguments and its default config.
#include <CLI/CLI.hpp>

namespace kiln::cli {

void add_templates_command(CLI::App &app);

}  // namespace kiln::cli
