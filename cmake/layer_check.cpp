// The one source of every layer's link check (compiler/CMakeLists.txt): the library under check
// is linked into the shared object whole, so this file needs no code of its own.
