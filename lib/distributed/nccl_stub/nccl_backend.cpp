// The "nccl" process group backend of a build without CUDA: choosing it is a clear error.
#include "distributed/process_group.h"

namespace tr::distributed {

namespace {
const Registrar<ProcessGroupBackend> nccl_backend(
    "nccl", {[](Store&, const ProcessGroupOptions&) -> std::unique_ptr<ProcessGroup> {
      throw Error(
          "process group: backend \"nccl\" needs a trainer built with CUDA (this one was built without it); "
          "use backend = \"gloo\" for CPU training");
    }});
}  // namespace

}  // namespace tr::distributed
