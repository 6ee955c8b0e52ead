// The shared library libzps is made of the static core libraries; CMake needs at least one source file
// of its own to create a library target.
#include "zps/worker.h"
