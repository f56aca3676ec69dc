// The pickle reader tries the run of memo GETs (a stack's frames) that followed the same two runs
// before (Machine::run_successors_, pickle_fast_paths.cpp) before it finds and hashes the run's
// key. A prediction is taken only when the input holds the very same bytes and a non-GET opcode
// after them. These pickles repeat a cycle of stacks, so that each run after the first cycle is
// predicted, and then put runs after the same two runs that differ from the prediction where it
// matters: longer by one GET (the prediction is a prefix), shorter by one, one index changed in
// the middle, one GET more that names a slot never stored, and the input cut in and right after
// the run. The reference is the checked switch alone (PickleOptions::fast_paths = false), as in
// the fuzz harness: the same document with containers aliased the same way (skipped frames
// lists aside), or the same error message.
#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "fraglab/types.hpp"
#include "fuzz/pickle_tree.hpp"
#include "trace/pickle.hpp"
#include "trace/pickle_checked_path.hpp"
#include "trace/pickle_memo_writer.hpp"

namespace fraglab::pickle {
namespace {

// Writes a protocol-4 pickle of a list: first a list of frame strings (memo slots 2..), then
// trace-entry-like dicts {'action': 'alloc', 'frames': [GETs of frame strings]}.
class Writer : MemoWriter {
 public:
  explicit Writer(int frames) {
    out_ = "\x80\x04]\x94(]\x94(";  // outer list (slot 0), MARK, the frames' list (slot 1), MARK
    next_slot_ = 2;
    for (int f = 0; f < frames; ++f) str("frame" + std::to_string(f));
    out_ += 'e';  // APPENDS: the frame strings into their list
  }
  // Slot of frame f.
  static std::uint32_t frame(int f) { return static_cast<std::uint32_t>(2 + f); }

  void entry(const std::vector<std::uint32_t>& stack) {
    out_ += "}\x94(";
    ++next_slot_;
    key("action");
    MemoWriter::key("alloc", alloc_slot_);  // the value, memoized like a key
    key("frames");
    out_ += "]\x94(";
    ++next_slot_;
    for (std::uint32_t slot : stack) get(slot);
    out_ += "eu";  // APPENDS SETITEMS
  }
  std::string finish() const { return out_ + "e."; }  // APPENDS the entries, STOP

 private:
  void key(const std::string& name) { MemoWriter::key(name, name == "action" ? action_slot_ : frames_slot_); }
  std::uint32_t action_slot_ = 0, frames_slot_ = 0, alloc_slot_ = 0;
};

// A stack of `n` frames from `first` on, every third one from frames 200-399 (slots 202-401: a
// LONG_BINGET from slot 256 on), so that runs mix both GET opcodes.
std::vector<std::uint32_t> stack(int first, int n) {
  std::vector<std::uint32_t> s;
  s.reserve(static_cast<std::size_t>(n));
  for (int i = 0; i < n; ++i) s.push_back(Writer::frame(i % 3 == 2 ? 200 + (first + i) % 200 : (first + i) % 200));
  return s;
}

// X Y A B C three times over (after X Y comes A: it is then predicted), then X Y `edge` B.
std::string cycle_then(const std::vector<std::uint32_t>& edge, std::size_t repeats = 3) {
  Writer w(400);
  const auto x = stack(0, 30), y = stack(40, 25), a = stack(80, 36), b = stack(120, 36), c = stack(160, 12);
  for (std::size_t r = 0; r < repeats; ++r)
    for (const auto* s : {&x, &y, &a, &b, &c}) w.entry(*s);
  w.entry(x);
  w.entry(y);
  w.entry(edge);
  w.entry(b);  // and a run after it
  return w.finish();
}

TEST(PickleRunSuccessor, PredictedRunsParseAsTheCheckedPath) {
  const auto a = stack(80, 36);
  expect_as_checked_path(cycle_then(a), "A again", true);
  expect_as_checked_path(cycle_then(a, 1), "A after one cycle", true);
}

TEST(PickleRunSuccessor, RunThatDiffersFromThePrediction) {
  const auto a = stack(80, 36);
  auto longer = a;
  longer.push_back(Writer::frame(7));  // the prediction is a prefix: a GET follows its bytes
  expect_as_checked_path(cycle_then(longer), "A and one GET more", true);
  auto shorter = a;
  shorter.pop_back();  // APPENDS where the prediction has a GET
  expect_as_checked_path(cycle_then(shorter), "A less its last GET", true);
  for (std::size_t at : {std::size_t{0}, std::size_t{17}, a.size() - 1}) {
    auto changed = a;
    changed[at] = Writer::frame(399);
    expect_as_checked_path(cycle_then(changed), "A with GET " + std::to_string(at) + " changed", true);
  }
}

TEST(PickleRunSuccessor, PredictedBytesThenABadGet) {
  auto bad = stack(80, 36);
  bad.push_back(70000);  // a slot never stored, right after the predicted bytes
  const std::string bytes = cycle_then(bad);
  expect_as_checked_path(bytes, "A then a bad GET", true);
  for (std::size_t at : {std::size_t{0}, std::size_t{20}, std::size_t{35}}) {
    auto named_bad = stack(80, 36);
    named_bad[at] = 70000;  // as long as the GET it replaces (LONG_BINGET at 20 and 35)
    expect_as_checked_path(cycle_then(named_bad), "A with GET " + std::to_string(at) + " naming a slot never stored",
                           true);
  }
  std::unique_ptr<PickleDocument> doc;
  EXPECT_THROW(doc = std::make_unique<PickleDocument>(bytes, "s.pickle",
                                                      PickleOptions{.skip_key = "frames", .fast_paths = true}),
               InputError);
}

// X Y followed by A and by D in turn (the second way of run_successors_), then by each of them
// changed in one GET, and by A cut short.
TEST(PickleRunSuccessor, TwoRunsFollowingTheSameTwoInTurn) {
  const auto x = stack(0, 30), y = stack(40, 25), a = stack(80, 36), d = stack(100, 30);
  auto a_changed = a, d_changed = d;
  a_changed[5] = Writer::frame(399);
  d_changed[29] = Writer::frame(398);
  auto a_short = a;
  a_short.pop_back();
  const std::vector<const std::vector<std::uint32_t>*> lasts{&a, &d, &a_changed, &d_changed, &a_short};
  for (const std::vector<std::uint32_t>* last : lasts) {
    Writer w(400);
    for (int r = 0; r < 4; ++r)
      for (const std::vector<std::uint32_t>* s : {&x, &y, r % 2 ? &d : &a}) w.entry(*s);
    w.entry(x);
    w.entry(y);
    w.entry(*last);
    w.entry(x);
    expect_as_checked_path(w.finish(), "X Y then A or D in turn, then a run of " + std::to_string(last->size()), true);
  }
}

// Cut anywhere in the last runs: a predicted run may not reach past the input's end.
TEST(PickleRunSuccessor, InputCutInOrRightAfterAPredictedRun) {
  const std::string whole = cycle_then(stack(80, 36));
  ASSERT_GT(whole.size(), 600u);
  for (std::size_t n = whole.size() - 600; n < whole.size(); ++n)
    expect_as_checked_path(whole.substr(0, n), "cut at " + std::to_string(n), true);
}

}  // namespace
}  // namespace fraglab::pickle
