// DictLayout: where dicts that list their keys alike keep a fixed set of wanted keys, learned
// once and then checked by pointers. The snapshot reader reads trace entries, segments and blocks
// through it (README "Traces").
//
// Pickle writers memoize key strings, and every dict of one kind (trace entry, segment, block)
// lists its keys in the same order: a dict's keys are almost always the very same views into the
// input, at the same positions, as the last dict's. Checking that costs one pointer compare in all
// when the pickle reader gave both dicts the same key array (pickle.hpp DictObject), else a
// pointer compare per key, instead of a string compare per key per lookup (Value::find). The
// positions are then known.
//
// Invariants:
//  - get() returns exactly what Value::find(name) would: the value of the last key equal to the
//    name (Python dict semantics for duplicate SETITEMs), or nullptr;
//  - a mismatch only means learning the keys again: the cache never changes a result;
//  - dicts with a key that is not a str, or with more than kMaxKeys keys, are learned every time.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "trace/pickle.hpp"

namespace fraglab {

template <std::size_t N>
class DictLayout {
 public:
  // `names`: the wanted keys; get(dict, i) is the value of names[i].
  explicit DictLayout(const std::array<std::string_view, N>& names) : names_(names) { position_.fill(-1); }

  // Learns `dict`'s key positions unless its keys are the last dict's. Anything but a dict has
  // none of the keys. Returns how many keys it had to look at beyond the cached check (0 when the
  // layout matched): what a reader charges against its budget for walking shared values.
  std::uint32_t look_at(const pickle::Value& dict) {
    const std::uint32_t n = dict.dict_size();  // 0 for anything but a dict: never matches
    if (matches(dict, n)) return 0;
    learn(dict, n);
    return n;
  }
  // The value of names[field] in the dict last passed to look_at(); nullptr when absent.
  const pickle::Value* get(const pickle::Value& dict, std::size_t field) const {
    const std::int32_t at = position_[field];
    if (at < 0) return nullptr;
    const pickle::Value* value = &dict.dict_value(static_cast<std::uint32_t>(at));
    // A value's address is never null: said, so that callers' null checks (a missing key) fold
    // into the test of `at` above instead of testing the address again (~8 instructions an entry).
    if (value == nullptr) __builtin_unreachable();
    return value;
  }
  std::string_view name(std::size_t field) const { return names_[field]; }

 private:
  static constexpr std::uint32_t kMaxKeys = 32;

  bool matches(const pickle::Value& dict, std::uint32_t n) {
    if (n != size_ || n == 0) return false;
    // Keys only ever get appended: the same key array and size are the same keys.
    if (dict.dict->keys == keys_) return true;
    for (std::uint32_t k = 0; k < n; ++k) {
      const pickle::Value& key = dict.dict_key(k);
      if (key.kind != pickle::Kind::Str || key.text != text_[k] || key.length != length_[k]) return false;
    }
    keys_ = dict.dict->keys;
    return true;
  }
  // Classifies every key; a later duplicate overwrites an earlier one's position.
  [[gnu::noinline]] void learn(const pickle::Value& dict, std::uint32_t n) {  // rare: not inlined
    position_.fill(-1);
    size_ = 0;
    if (!dict.is_dict()) return;
    size_ = n <= kMaxKeys ? n : 0;
    keys_ = dict.dict->keys;
    for (std::uint32_t k = 0; k < n; ++k) {
      const pickle::Value& key = dict.dict_key(k);
      if (key.kind != pickle::Kind::Str) {
        size_ = 0;
        continue;
      }
      if (k < kMaxKeys) {
        text_[k] = key.text;
        length_[k] = key.length;
      }
      for (std::size_t f = 0; f < N; ++f)
        if (key.str() == names_[f]) position_[f] = static_cast<std::int32_t>(k);
    }
  }

  std::array<std::string_view, N> names_;
  std::uint32_t size_ = 0;               // keys of the remembered layout; 0 = none
  const pickle::Value* keys_ = nullptr;  // the key array they were last seen in
  std::array<const char*, kMaxKeys> text_{};
  std::array<std::uint32_t, kMaxKeys> length_{};
  std::array<std::int32_t, N> position_{};  // by field; -1 = absent
};

}  // namespace fraglab
