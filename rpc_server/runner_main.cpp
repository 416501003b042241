// kiln-runner: the farm's runner daemon (runner_daemon.h), with the builtin operator library only.
#include "rpc_server/runner_daemon.h"

int main(int argc, char **argv) { return kiln::rpc::runner_daemon_main(argc, argv); }
