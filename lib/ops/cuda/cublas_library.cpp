// cublas_library(): dlopen of libcublas.so.<major> and libcublasLt.so.<major> (found as the
// executable's other CUDA libraries are, else in the toolkit's directory of the build), dlsym of
// each function. The CUDA emulation links the emulator's cuBLAS and takes its functions directly.
#include "ops/cuda/cublas_library.h"
#include <dlfcn.h>
#include <string>
#include <type_traits>
#include "core/error.h"

#define TR_CUBLAS_STR2(x) #x
#define TR_CUBLAS_STR(x) TR_CUBLAS_STR2(x)  // expands cublas_v2.h's macros: "cublasCreate_v2"

namespace tr::cuda {

namespace {

#if defined(TRAINER_CUDA_EMULATION)

CublasLibrary open_library() {
  CublasLibrary lib;
#define TR_CUBLAS_FN(library, name) lib.name = &::name;
#include "ops/cuda/cublas_functions.def"
#undef TR_CUBLAS_FN
  return lib;
}

#else

void* open_so(const std::string& soname) {
  if (void* h = ::dlopen(soname.c_str(), RTLD_NOW | RTLD_LOCAL)) return h;
  std::string why = ::dlerror();
#ifdef TR_CUDA_LIBRARY_DIR
  if (void* h = ::dlopen((std::string(TR_CUDA_LIBRARY_DIR) + "/" + soname).c_str(), RTLD_NOW | RTLD_LOCAL)) return h;
#endif
  throw Error(str("CUDA: cannot load ", soname, " (", why,
                  "); GPU runs need the cuBLAS of the CUDA toolkit this binary was built with"));
}

CublasLibrary open_library() {
  const std::string major = std::to_string(CUBLAS_VER_MAJOR);
  struct So {
    std::string name;
    void* handle;
  };
  So lt{"libcublasLt.so." + major, nullptr}, blas{"libcublas.so." + major, nullptr};
  lt.handle = open_so(lt.name);
  blas.handle = open_so(blas.name);
  CublasLibrary lib;
  auto resolve = [](auto& fn, const So& so, const char* symbol) {
    void* p = ::dlsym(so.handle, symbol);
    if (!p) throw Error(str("CUDA: ", so.name, " has no ", symbol, "; this binary was built against a newer cuBLAS"));
    fn = reinterpret_cast<std::remove_reference_t<decltype(fn)> >(p);
  };
#define TR_CUBLAS_FN(library, name) resolve(lib.name, library, TR_CUBLAS_STR(name));
#include "ops/cuda/cublas_functions.def"
#undef TR_CUBLAS_FN
  return lib;
}

#endif

}  // namespace

const CublasLibrary& cublas_library() {
  static const CublasLibrary lib = open_library();
  return lib;
}

}  // namespace tr::cuda
