// Reading a parsed pickle's values (pickle.hpp): kind names, sequence items, dict lookup.
#include <cstring>

#include "trace/pickle.hpp"

namespace fraglab::pickle {

std::string_view kind_name(Kind kind) {
  switch (kind) {
    case Kind::None:
      return "None";
    case Kind::Bool:
      return "bool";
    case Kind::Int:
    case Kind::UInt:
      return "int";
    case Kind::Float:
      return "float";
    case Kind::Str:
      return "str";
    case Kind::Bytes:
      return "bytes";
    case Kind::List:
      return "list";
    case Kind::Tuple:
      return "tuple";
    case Kind::Dict:
      return "dict";
    case Kind::Missing:
      return "missing";
    case Kind::Skipped:
      return "skipped";
  }
  return "?";
}

std::span<const Value> Value::items() const {
  if (kind == Kind::List) return {list->items, list->size};
  if (kind == Kind::Tuple) return {tuple_items, length};
  return {};
}

const Value* Value::find(std::string_view key) const {
  if (kind != Kind::Dict) return nullptr;
  // From the back: the last SETITEM of a key wins, as in Python.
  for (std::uint32_t i = dict->size; i-- > 0;) {
    const Value& k = dict->keys[i];
    if (k.kind == Kind::Str && k.length == key.size() && std::memcmp(k.text, key.data(), key.size()) == 0)
      return &dict->values[i];
  }
  return nullptr;
}

}  // namespace fraglab::pickle
