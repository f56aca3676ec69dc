// Comparing two parses of the same pickle (tests/fuzz/pickle_fuzz.cpp): the reference parse
// builds everything through the checked switch; the other may have used the fast paths and
// PickleOptions::skip_key. Equal means: the same values, containers aliased the same way (memo
// references are part of the document), and a Skipped value only where the reference holds a
// container of the recorded kind as the value of a dict under the skip key.
#pragma once

#include <bit>
#include <cstdint>
#include <string>
#include <string_view>
#include <unordered_map>

#include "trace/pickle.hpp"

namespace fraglab::fuzz {

class PickleTreeCompare {
 public:
  // Deeper than this, values are taken as equal: recursion must not overflow the harness's stack
  // on inputs the (iterative) reader accepts, such as lists nested a million deep.
  static constexpr int kMaxDepth = 200;

  explicit PickleTreeCompare(std::string_view skip_key) : skip_key_(skip_key) {}

  // Empty when equal, else where and how they differ.
  std::string differences(const pickle::Value& reference, const pickle::Value& other) {
    why_.clear();
    same(reference, other, false, 0);
    return why_;
  }

 private:
  using Kind = pickle::Kind;
  using Value = pickle::Value;

  bool differ(std::string what) {
    why_ = std::move(what);
    return false;
  }

  bool same(const Value& ref, const Value& other, bool under_skip_key, int depth) {
    if (depth > kMaxDepth) return true;
    if (ref.kind == Kind::Skipped || ref.kind == Kind::Missing)
      return differ("the reference holds a " + std::string(pickle::kind_name(ref.kind)) + " value");
    if (other.kind == Kind::Missing) return differ("a Missing value is visible");
    if (other.kind == Kind::Skipped) {
      const auto would_be = static_cast<Kind>(other.length);
      if (skip_key_.empty()) return differ("skipped although skipping was not used");
      if (!under_skip_key) return differ("skipped, but not a dict value under the skip key");
      if (ref.kind != would_be)
        return differ("skipped as a " + std::string(pickle::kind_name(would_be)) + ", the reference has a " +
                      std::string(pickle::kind_name(ref.kind)));
      return true;
    }
    if (ref.kind != other.kind)
      return differ("kind " + std::string(pickle::kind_name(ref.kind)) + " vs " +
                    std::string(pickle::kind_name(other.kind)));
    switch (ref.kind) {
      case Kind::None:
        return true;
      case Kind::Bool:
        return ref.boolean == other.boolean || differ("bool differs");
      case Kind::Int:
      case Kind::UInt:
        return ref.unsigned_integer == other.unsigned_integer || differ("int differs");
      case Kind::Float:
        return std::bit_cast<std::uint64_t>(ref.real) == std::bit_cast<std::uint64_t>(other.real) ||
               differ("float differs");
      case Kind::Str:
      case Kind::Bytes:
        return ref.str() == other.str() || differ("str/bytes differ");
      case Kind::List:
      case Kind::Tuple: {
        const void* rid =
            ref.kind == Kind::List ? static_cast<const void*>(ref.list) : static_cast<const void*>(ref.tuple_items);
        const void* oid = other.kind == Kind::List ? static_cast<const void*>(other.list)
                                                   : static_cast<const void*>(other.tuple_items);
        const int seen = pair_seen(rid, oid);
        if (seen != 0) return seen > 0;
        const auto r = ref.items();
        const auto o = other.items();
        if (r.size() != o.size()) return differ("sequence sizes differ");
        for (std::size_t i = 0; i < r.size(); ++i)
          if (!same(r[i], o[i], false, depth + 1)) return false;
        return true;
      }
      case Kind::Dict: {
        const int seen = pair_seen(ref.dict, other.dict);
        if (seen != 0) return seen > 0;
        if (ref.dict_size() != other.dict_size()) return differ("dict sizes differ");
        for (std::uint32_t i = 0; i < ref.dict_size(); ++i) {
          const Value& key = ref.dict_key(i);
          if (!same(key, other.dict_key(i), false, depth + 1)) return false;
          const bool under = !skip_key_.empty() && key.is_str() && key.str() == skip_key_;
          if (!same(ref.dict_value(i), other.dict_value(i), under, depth + 1)) return false;
        }
        return true;
      }
      case Kind::Missing:
      case Kind::Skipped:
        break;
    }
    return differ("unexpected kind");
  }

  // 1: this pair was met before; 0: new, now recorded; -1: one side was met paired with another.
  int pair_seen(const void* rid, const void* oid) {
    if (rid == nullptr && oid == nullptr) return 0;  // empty tuples own no storage
    const auto r = ref_to_other_.find(rid);
    const auto o = other_to_ref_.find(oid);
    if (r != ref_to_other_.end() || o != other_to_ref_.end()) {
      if (r != ref_to_other_.end() && o != other_to_ref_.end() && r->second == oid && o->second == rid) return 1;
      differ("containers alias differently");
      return -1;
    }
    ref_to_other_.emplace(rid, oid);
    other_to_ref_.emplace(oid, rid);
    return 0;
  }

  std::string_view skip_key_;
  std::string why_;
  std::unordered_map<const void*, const void*> ref_to_other_;
  std::unordered_map<const void*, const void*> other_to_ref_;
};

}  // namespace fraglab::fuzz
