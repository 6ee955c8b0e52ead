// dlopen of cuBLAS and NCCL (see gpu_libraries.h for why they are not linked).
#include "kernels/cuda/gpu_libraries.h"

#include <dlfcn.h>

#include <string>

namespace zps::kernels::cuda {
namespace {

#define ZPS_GPU_LIBRARY_STRINGIFY_EXPANDED(x) #x
#define ZPS_GPU_LIBRARY_STRINGIFY(x) ZPS_GPU_LIBRARY_STRINGIFY_EXPANDED(x)

// The loader's usual search (LD_LIBRARY_PATH, ld.so.cache), then the toolkit's library folder this
// build was configured with, which a CUDA image does not always register with ldconfig.
StatusOr<void*> openLibrary(const std::string& soname) {
  void* lib = dlopen(soname.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (lib != nullptr) return lib;
  std::string error = dlerror();
#ifdef ZPS_CUDA_LIBRARY_DIR
  const std::string in_toolkit = std::string(ZPS_CUDA_LIBRARY_DIR) + "/" + soname;
  lib = dlopen(in_toolkit.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (lib != nullptr) return lib;
  error += "; " + std::string(dlerror());
#endif
  return Unavailable("cannot load " + soname + " (" + error + "); install it or add its folder to LD_LIBRARY_PATH");
}

template <typename Function>
Status resolve(void* lib, const std::string& soname, const char* symbol, Function* out) {
  *out = reinterpret_cast<Function>(dlsym(lib, symbol));
  if (*out == nullptr) return Unavailable(soname + " has no " + symbol + ": not the version zps was built against");
  return Status::OK();
}

// Loads `soname` and fills `Library` once per process; the library stays loaded for the process's life.
template <typename Library, typename Fill>
StatusOr<const Library*> loadOnce(const std::string& soname, Fill fill) {
  static const StatusOr<const Library*> loaded = [&]() -> StatusOr<const Library*> {
    ZPS_ASSIGN_OR_RETURN(void* lib, openLibrary(soname));
    auto* library = new Library;  // never freed, like the library itself
    Status filled = fill(lib, library);
    if (!filled.ok()) {
      delete library;
      return filled;
    }
    return static_cast<const Library*>(library);
  }();
  return loaded;
}

#define ZPS_GPU_LIBRARY_RESOLVE(name) \
  ZPS_RETURN_IF_ERROR(resolve(lib, soname, ZPS_GPU_LIBRARY_STRINGIFY(name), &library->name));

}  // namespace

StatusOr<const CublasLibrary*> cublasLibrary() {
  const std::string soname = "libcublas.so." + std::to_string(CUBLAS_VER_MAJOR);
  return loadOnce<CublasLibrary>(soname, [&](void* lib, CublasLibrary* library) -> Status {
    ZPS_CUBLAS_FUNCTIONS(ZPS_GPU_LIBRARY_RESOLVE)
    return Status::OK();
  });
}

StatusOr<const DriverLibrary*> driverLibrary() {
  const std::string soname = "libcuda.so.1";
  return loadOnce<DriverLibrary>(soname, [&](void* lib, DriverLibrary* library) -> Status {
    ZPS_CUDA_DRIVER_FUNCTIONS(ZPS_GPU_LIBRARY_RESOLVE)
    return Status::OK();
  });
}

#ifdef ZPS_HAVE_NCCL
StatusOr<const NcclLibrary*> ncclLibrary() {
  const std::string soname = "libnccl.so." + std::to_string(NCCL_MAJOR);
  return loadOnce<NcclLibrary>(soname, [&](void* lib, NcclLibrary* library) -> Status {
    ZPS_NCCL_FUNCTIONS(ZPS_GPU_LIBRARY_RESOLVE)
    return Status::OK();
  });
}
#endif

}  // namespace zps::kernels::cuda
