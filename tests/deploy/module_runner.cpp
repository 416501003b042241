// kiln_module_runner: loads a compiled Kiln library in a process of its own and runs one function,
// for tests that check that a library works away from the compiler that built it. It links only
// the runtime (kiln_deploy).
//
//   kiln_module_runner LIBRARY --list
//       prints "name: signature" for each function
//   kiln_module_runner LIBRARY FUNCTION IN OUT
//       reads the arguments' bytes from IN (in parameter order, shapes from the signature), calls
//       FUNCTION, writes every argument's bytes to OUT. Exit status 0; 2 if the function failed
//       (its message on stderr); 1 for other errors.
#include <fstream>
#include <iostream>
#include <iterator>
#include <string>
#include <vector>

#include "deploy/module.h"

int main(int argc, char **argv) {
  using namespace kiln::deploy;
  if (argc != 3 && argc != 5) {
    std::cerr << "usage: " << argv[0] << " LIBRARY --list | LIBRARY FUNCTION IN OUT\n";
    return 1;
  }
  try {
    Module m = Module::load(argv[1]);
    if (argc == 3) {
      for (const auto &f : m.functions()) std::cout << f.name << ": " << f.signature << "\n";
      return 0;
    }
    const FunctionInfo *f = m.find(argv[2]);
    if (!f) throw ModuleError(std::string("no function ") + argv[2]);
    std::ifstream in(argv[3], std::ios::binary);
    std::vector<Tensor> args;
    for (const auto &p : f->params) {
      Tensor t = Tensor::empty(p.shape, p.dtype);
      std::vector<char> bytes(t.nbytes());
      in.read(bytes.data(), static_cast<std::streamsize>(bytes.size()));
      if (!in) throw ModuleError("input file too short for " + p.name);
      t.copy_from(bytes.data(), bytes.size());
      args.push_back(t);
    }
    try {
      m.call(f->name, args);
    } catch (const KernelError &e) {
      std::cerr << e.what() << "\n";
      return 2;
    }
    std::ofstream out(argv[4], std::ios::binary);
    for (const auto &t : args) {
      std::vector<char> bytes(t.nbytes());
      t.copy_to(bytes.data(), bytes.size());
      out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
    }
    return out ? 0 : 1;
  } catch (const std::exception &e) {
    std::cerr << e.what() << "\n";
    return 1;
  }
}
