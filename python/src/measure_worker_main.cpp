// kiln-measure-worker: the process kiln.tune's local measurer starts to compile and time
// candidates (rpc_server/measure_worker.h); the Python interpreter cannot be that process.
#include <cstring>

#include "rpc_server/measure_worker.h"

int main(int argc, char **argv) {
  if (argc > 1 && std::strcmp(argv[1], "--measure-worker") == 0) return kiln::rpc::measure_worker_main();
  return 2;
}
