// CudaDriver: see cuda_driver.hpp.
#include "device/cuda/cuda_driver.hpp"

#include <dlfcn.h>
#include <fmt/format.h>

#include <cstdlib>

#include "fraglab/types.hpp"

namespace fraglab::cuda {
namespace {

#define FRAGLAB_CUDA_STR2(x) #x
#define FRAGLAB_CUDA_STR(x) FRAGLAB_CUDA_STR2(x)  // after macro expansion: "cuMemAlloc_v2"

}  // namespace

std::shared_ptr<const CudaDriver> CudaDriver::load(const std::string& what) {
  const char* override_path = std::getenv("FRAGLAB_CUDA_DRIVER");
  const std::string library = override_path != nullptr && *override_path != '\0' ? override_path : "libcuda.so.1";
  // RTLD_LOCAL: the driver's symbols stay out of the global namespace.
  void* handle = ::dlopen(library.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (handle == nullptr) {
    throw InputError(
        fmt::format("{}: no CUDA driver ({} cannot be loaded: {}); use --device sim", what, library, ::dlerror()));
  }
  std::shared_ptr<CudaDriver> driver(new CudaDriver());
  driver->handle_ = handle;
  driver->library_ = library;
#define FRAGLAB_CUDA_RESOLVE(name)                                                                                     \
  driver->table_.name = reinterpret_cast<decltype(&::name)>(::dlsym(handle, FRAGLAB_CUDA_STR(name)));                  \
  if (driver->table_.name == nullptr) {                                                                                \
    throw InputError(fmt::format("{}: no usable CUDA driver ({} has no {}; a driver of CUDA 11.2 or newer is needed)", \
                                 what, library, FRAGLAB_CUDA_STR(name)));                                              \
  }
  FRAGLAB_CUDA_DRIVER_CALLS(FRAGLAB_CUDA_RESOLVE)
#undef FRAGLAB_CUDA_RESOLVE
  const CUresult init = driver->table_.cuInit(0);
  if (init != CUDA_SUCCESS) {
    throw InputError(
        fmt::format("{}: no CUDA device (cuInit failed: {}); use --device sim", what, driver->error_text(init)));
  }
  return driver;
}

// The library stays loaded for the rest of the process (no dlclose): a CUDA driver keeps state of
// its own that is not meant to be unloaded, and memory it still holds would otherwise be lost with
// its pointers (LeakSanitizer reports exactly that for the fake driver's tables).
CudaDriver::~CudaDriver() = default;

std::string CudaDriver::error_text(CUresult result) const {
  const char* text = nullptr;
  if (table_.cuGetErrorString != nullptr && table_.cuGetErrorString(result, &text) == CUDA_SUCCESS && text != nullptr) {
    return fmt::format("{} ({})", text, static_cast<int>(result));
  }
  return fmt::format("CUresult {}", static_cast<int>(result));
}

}  // namespace fraglab::cuda
