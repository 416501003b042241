#pragma once
// The real architectures of tests/frontend/make_models.py for tests: each exported once into the
// build tree's models folder (KILN_MODELS_DIR) and reused while the script is unchanged.
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <string>

#ifndef KILN_MAKE_MODELS_SCRIPT
#error "KILN_MAKE_MODELS_SCRIPT must name tests/frontend/make_models.py"
#endif
#ifndef KILN_MODELS_DIR
#error "KILN_MODELS_DIR must name the folder the models are exported into"
#endif

namespace kiln::test {

constexpr const char *kModelsPython = "/usr/bin/python3";
constexpr int kNoTorch = 77;  // make_models.py: a model must be exported and torch is missing

// Runs make_models.py for one model (KILN_MODELS_DIR/<model>/model.onnx, input_0.pb, output_0.pb);
// its exit status, or -1 when it could not run to the end.
inline int make_model(const std::string &model) {
  const std::string script = KILN_MAKE_MODELS_SCRIPT, out_dir = KILN_MODELS_DIR;
  std::fflush(stdout);
  pid_t pid = fork();
  if (pid == 0) {
    execl(kModelsPython, kModelsPython, script.c_str(), out_dir.c_str(), model.c_str(), static_cast<char *>(nullptr));
    _exit(127);
  }
  int status = 0;
  if (pid < 0 || waitpid(pid, &status, 0) != pid || !WIFEXITED(status)) return -1;
  return WEXITSTATUS(status);
}

}  // namespace kiln::test
