// Device: where a tensor's storage lives (cpu, or cuda:N).
#pragma once
#include <string>

namespace tr {

enum class DeviceType : uint8_t { CPU = 0, CUDA = 1 };
constexpr int kNumDeviceTypes = 2;

struct Device {
  DeviceType type = DeviceType::CPU;
  int index = 0;

  Device() = default;
  Device(DeviceType t, int i = 0) : type(t), index(i) {}
  // "cpu", "cuda", "cuda:1". A CUDA device on a machine without a usable GPU is an error here.
  Device(const std::string& spec);  // NOLINT(google-explicit-constructor): Device("cuda") reads like torch
  Device(const char* spec) : Device(std::string(spec)) {}  // NOLINT

  bool is_cpu() const { return type == DeviceType::CPU; }
  bool is_cuda() const { return type == DeviceType::CUDA; }
  bool operator==(const Device& o) const { return type == o.type && index == o.index; }
  bool operator!=(const Device& o) const { return !(*this == o); }
  std::string str() const;
};

inline Device kCPU{DeviceType::CPU, 0};

}  // namespace tr
