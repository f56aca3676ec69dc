// PickleWriter: writes plain Python values (dict, list, tuple, str, int, float, bool, None) as a
// pickle, streaming, for snapshots PyTorch's tools and fraglab's reader load
// (docs/allocator-model.md §11.1). Only protocol 2 opcodes, no memo and no GLOBAL / REDUCE / BUILD:
// loading it runs no code and builds no class, like the pickles torch.cuda.memory._dump_snapshot()
// writes. Containers are built with MARK ... SETITEMS / APPENDS in batches of 1000 items, as
// Python's own pickler does.
//
// Usage: begin_dict(); key("a"); value(1); ...; end_dict(); finish(). Every begin_* needs its
// end_*; a dict alternates keys and values (the writer checks nesting, not key/value pairing).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace fraglab {

class PickleWriter {
 public:
  PickleWriter();

  void begin_dict();
  void end_dict();
  void begin_list();
  void end_list();
  // A tuple of 1 to 3 plain scalars is written with TUPLE1..3; begin/end handle any length.
  void begin_tuple();
  void end_tuple();

  void none();
  void boolean(bool b);
  void integer(std::int64_t i);
  void unsigned_integer(std::uint64_t u);
  void real(double d);
  void str(std::string_view s);
  void key(std::string_view s) { str(s); }

  // Ends the pickle (STOP) and hands over its bytes. Throws std::logic_error when a container
  // is still open.
  std::string finish();

 private:
  void op(char c) { out_.push_back(c); }
  void put_le(std::uint64_t v, int bytes);
  void item();  // one more item in the innermost open container: batch it if needed

  enum class Kind : std::uint8_t { Dict, List, Tuple };
  struct Open {
    Kind kind;
    std::uint64_t items = 0;  // items (values and keys) since the last MARK
  };
  std::string out_;
  std::vector<Open> open_;
};

}  // namespace fraglab
