// The accounting half of Device: every call passes through here, so reserved bytes, their peak
// and the call counters cannot be misreported by a policy or a backend.
#include "fraglab/device.hpp"

#include <algorithm>

namespace fraglab {

void Device::notify(DeviceCall call, Addr addr, Bytes size) {
  for (DeviceListener* listener : listeners_) listener->on_device_call(call, addr, size);
}

void Device::add_reserved(Bytes bytes) {
  reserved_ += bytes;
  peak_reserved_ = std::max(peak_reserved_, reserved_);
}

void Device::remove_listener(DeviceListener* listener) {
  listeners_.erase(std::remove(listeners_.begin(), listeners_.end(), listener), listeners_.end());
}

std::optional<Addr> Device::malloc(Bytes size, Addr at) {
  std::optional<Addr> addr = do_malloc(size, at);
  time_malloc(size);
  if (!addr) {
    ++counters_.malloc_failures;
    return std::nullopt;
  }
  ++counters_.malloc_calls;
  add_reserved(malloc_footprint(size));
  notify(DeviceCall::Malloc, *addr, size);
  return addr;
}

void Device::free(Addr addr) {
  Bytes released = do_free(addr);
  time_free(released);
  ++counters_.free_calls;
  reserved_ -= released;
  notify(DeviceCall::Free, addr, released);
}

std::optional<Addr> Device::reserve_range(Bytes size, Addr at) {
  std::optional<Addr> addr = do_reserve_range(size, at);
  if (addr) {
    ++counters_.reserve_calls;
    time_reserve(*addr, size);
  }
  return addr;
}

void Device::release_range(Addr addr) {
  do_release_range(addr);
  time_release(addr);
  ++counters_.release_calls;
}

bool Device::map(Addr addr, Bytes size, Bytes handle) {
  if (!do_map(addr, size)) {
    time_map(size, handle, false);
    ++counters_.map_failures;
    return false;
  }
  time_map(size, handle, true);
  ++counters_.map_calls;
  add_reserved(size);
  notify(DeviceCall::Map, addr, size);
  return true;
}

void Device::unmap(Addr addr, Bytes size, Bytes handle) {
  do_unmap(addr, size);
  time_unmap(size, handle);
  ++counters_.unmap_calls;
  reserved_ -= size;
  notify(DeviceCall::Unmap, addr, size);
}

void Device::map_alias(Addr addr, Bytes size, Addr source) {
  do_map_alias(addr, size, source);
  time_map_alias(size);
  ++counters_.alias_map_calls;
  notify(DeviceCall::MapAlias, addr, size);
}

void Device::unmap_alias(Addr addr, Bytes size) {
  do_unmap_alias(addr, size);
  time_unmap_alias(size);
  ++counters_.alias_unmap_calls;
  notify(DeviceCall::UnmapAlias, addr, size);
}

}  // namespace fraglab
