// kiln-runner-test: the runner daemon with the fault-injection templates (test_templates.h), for
// the farm's service tests. Its measurement workers are this executable again, so they have the
// templates and the fault hooks too.
#include "rpc_server/runner_daemon.h"
#include "test_templates.h"

int main(int argc, char **argv) {
  return kiln::rpc::runner_daemon_main(argc, argv, kiln::rpc::test_templates_extension());
}
