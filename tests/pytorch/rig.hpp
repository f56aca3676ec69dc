// Test rig for the pytorch policy: a CachingAllocator on a SimDevice, with every device call
// recorded. Addresses: the SimDevice places ranges with a bump pointer from kBaseAddress
// (2 MiB aligned), so the n-th fresh segment lands right after the previous one.
#pragma once

#include <gtest/gtest.h>

#include <string>
#include <tuple>
#include <vector>

#include "fraglab/sim_device.hpp"
#include "pytorch/caching_allocator.hpp"

namespace fraglab::cca::test {

inline constexpr Addr B = SimDevice::kBaseAddress;

struct Call {
  DeviceCall call;
  Addr addr;
  Bytes size;
  bool operator==(const Call&) const = default;
};
inline std::ostream& operator<<(std::ostream& os, const Call& c) {
  static const char* names[] = {"Malloc", "Free", "Map", "Unmap"};
  return os << names[static_cast<int>(c.call)] << "(0x" << std::hex << c.addr << std::dec << ", " << c.size << ")";
}

struct Recorder final : DeviceListener {
  std::vector<Call> calls;
  void on_device_call(DeviceCall call, Addr addr, Bytes size) override { calls.push_back({call, addr, size}); }
};

struct Rig {
  explicit Rig(const std::string& options = "", Bytes capacity = 80 * GiB)
      : device(SimDeviceConfig{capacity, 0}), alloc(parse_config(options), device) {
    device.add_listener(&recorder);
  }
  Block malloc(Bytes n, StreamId stream = 0) {
    std::optional<Block> b = alloc.malloc(n, stream);
    EXPECT_TRUE(b.has_value()) << "unexpected OOM for " << n << ": " << alloc.last_oom_message();
    return b.value_or(Block{});
  }
  std::int64_t stat(const std::string& key) const {
    for (const auto& [k, v] : alloc.stats().listing(true)) {
      if (k == key) return v;
    }
    ADD_FAILURE() << "no stat " << key;
    return -999;
  }
  std::vector<Call>& calls() { return recorder.calls; }

  SimDevice device;
  Recorder recorder;
  CachingAllocator alloc;
};

}  // namespace fraglab::cca::test
