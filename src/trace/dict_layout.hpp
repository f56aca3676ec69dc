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
// Two layouts are remembered, the last used first: PyTorch writes a segment's 'frames' and
// 'blocks' in either order, and segments of both orders alternate (137 switches in 1,010 segments
// of lm2.7b), each switch a relearn of 12 keys when only one layout was kept.
//
// Invariants:
//  - get() returns exactly what Value::find(name) would: the value of the last key equal to the
//    name (Python dict semantics for duplicate SETITEMs), or nullptr;
//  - look_at() returns what it would with one remembered layout (the budget a reader charges
//    does not depend on the second);
//  - a mismatch only means learning the keys again: the cache never changes a result;
//  - dicts with a key that is not a str, or with more than kMaxKeys keys, are learned every time.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <string_view>
#include <utility>

#include "trace/pickle.hpp"

namespace fraglab {

template <std::size_t N>
class DictLayout {
 public:
  // `names`: the wanted keys; get(dict, i) is the value of names[i].
  explicit DictLayout(const std::array<std::string_view, N>& names) : names_(names) {
    layouts_[0].position.fill(-1);
    layouts_[1].position.fill(-1);
  }
  // Not copyable: current_ and other_ point into this object's layouts_.
  DictLayout(const DictLayout&) = delete;
  DictLayout& operator=(const DictLayout&) = delete;

  // Learns `dict`'s key positions unless its keys are the last dict's. Anything but a dict has
  // none of the keys. Returns how many keys it had to look at beyond the cached check (0 when the
  // layout matched the last dict's): what a reader charges against its budget for walking shared
  // values.
  std::uint32_t look_at(const pickle::Value& dict) {
    const std::uint32_t n = dict.dict_size();  // 0 for anything but a dict: never matches
    if (matches(*current_, dict, n)) return 0;
    // The two layouts trade roles by their pointers: a Layout is ~450 bytes, and copying three of
    // them per switch cost ~190 instructions (segments switch order ~270 times in lm2.7b-ctx512).
    std::swap(current_, other_);
    if (!matches(*current_, dict, n)) learn(dict, n);  // over the older one: the last stays as other_
    return n;
  }
  // The value of names[field] in the dict last passed to look_at(); nullptr when absent.
  const pickle::Value* get(const pickle::Value& dict, std::size_t field) const {
    const std::int32_t at = current_->position[field];
    if (at < 0) return nullptr;
    const pickle::Value* value = &dict.dict_value(static_cast<std::uint32_t>(at));
    // A value's address is never null: said, so that callers' null checks (a missing key) fold
    // into the test of `at` above instead of testing the address again (~8 instructions an entry).
    if (value == nullptr) __builtin_unreachable();
    return value;
  }
  // Whether the dict last passed to look_at() has every field of `fields` (bit f: names[f]).
  bool has_all(std::uint32_t fields) const { return (current_->present & fields) == fields; }
  // get() of a field has_all() vouched for: no test for a missing key.
  const pickle::Value& present(const pickle::Value& dict, std::size_t field) const {
    return dict.dict_value(static_cast<std::uint32_t>(current_->position[field]));
  }
  std::string_view name(std::size_t field) const { return names_[field]; }
  // Back to knowing no layout, as when made (the next look_at() learns, and charges, again).
  void forget() {
    for (Layout& layout : layouts_) {
      layout = Layout{};
      layout.position.fill(-1);
    }
    current_ = &layouts_[0];
    other_ = &layouts_[1];
  }

 private:
  static constexpr std::uint32_t kMaxKeys = 32;

  struct Layout {
    std::uint32_t size = 0;               // keys of the remembered layout; 0 = none
    const pickle::Value* keys = nullptr;  // the key array they were last seen in
    std::array<const char*, kMaxKeys> text{};
    std::array<std::uint32_t, kMaxKeys> length{};
    std::array<std::int32_t, N> position{};  // by field; -1 = absent
    std::uint32_t present = 0;               // bit f: position[f] >= 0
  };
  static_assert(N <= 32, "present has a bit per field");

  static bool matches(Layout& layout, const pickle::Value& dict, std::uint32_t n) {
    if (n != layout.size || n == 0) return false;
    // Keys only ever get appended: the same key array and size are the same keys.
    if (dict.dict->keys == layout.keys) return true;
    for (std::uint32_t k = 0; k < n; ++k) {
      const pickle::Value& key = dict.dict_key(k);
      if (key.kind != pickle::Kind::Str || key.text != layout.text[k] || key.length != layout.length[k]) return false;
    }
    layout.keys = dict.dict->keys;
    return true;
  }
  // Classifies every key into current_; a later duplicate overwrites an earlier one's position.
  [[gnu::noinline]] void learn(const pickle::Value& dict, std::uint32_t n) {  // rare: not inlined
    Layout& l = *current_;
    l.position.fill(-1);
    l.present = 0;
    l.size = 0;
    if (!dict.is_dict()) return;
    l.size = n <= kMaxKeys ? n : 0;
    l.keys = dict.dict->keys;
    for (std::uint32_t k = 0; k < n; ++k) {
      const pickle::Value& key = dict.dict_key(k);
      if (key.kind != pickle::Kind::Str) {
        l.size = 0;
        continue;
      }
      if (k < kMaxKeys) {
        l.text[k] = key.text;
        l.length[k] = key.length;
      }
      for (std::size_t f = 0; f < N; ++f)
        if (key.str() == names_[f]) {
          l.position[f] = static_cast<std::int32_t>(k);
          l.present |= 1u << f;
        }
    }
  }

  std::array<std::string_view, N> names_;
  std::array<Layout, 2> layouts_;
  Layout* current_ = &layouts_[0];  // the last dict's, which get() reads
  Layout* other_ = &layouts_[1];    // the one before a change of layout
};

}  // namespace fraglab
