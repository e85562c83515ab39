#include "core/device.h"
#include "core/cuda_hooks.h"
#include "core/error.h"

namespace tr {

Device::Device(const std::string& spec) {
  std::string s = spec;
  if (s == "cpu") {
    type = DeviceType::CPU;
    index = 0;
    return;
  }
  if (s.rfind("cuda", 0) == 0) {
    type = DeviceType::CUDA;
    index = 0;
    if (s.size() > 4) {
      TR_CHECK(s[4] == ':' && s.size() > 5, "invalid device string '", spec, "' (expected cpu, cuda or cuda:N)");
      try {
        size_t pos = 0;
        index = std::stoi(s.substr(5), &pos);
        TR_CHECK(pos == s.size() - 5 && index >= 0, "");
      } catch (const std::exception&) {
        throw Error(tr::str("invalid device string '", spec, "' (expected cpu, cuda or cuda:N)"));
      }
    }
    int n = cuda::device_count();
    TR_CHECK(n > 0, "device '", spec, "' requested but CUDA is not available: ", cuda::unavailable_reason());
    TR_CHECK(index < n, "device '", spec, "' requested but only ", n, " CUDA device(s) are visible");
    return;
  }
  throw Error(tr::str("invalid device string '", spec, "' (expected cpu, cuda or cuda:N)"));
}

std::string Device::str() const {
  if (type == DeviceType::CPU) return "cpu";
  return "cuda:" + std::to_string(index);
}

}  // namespace tr
