// Streaming a snapshot's trace entries (pickle::EntrySink, PickleOptions::entry_sink): the reader
// hands the entries of the first device trace list to the snapshot reader as it completes them and
// keeps none of them. Whatever a pickle does with those entries (fetches one by memo elsewhere,
// lists one twice, shares the list, breaks a byte), the Trace or the error message must be the one
// read without streaming.
#include <gtest/gtest.h>

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>

#include "fraglab/pickle_writer.hpp"
#include "fraglab/trace_io.hpp"
#include "fraglab/types.hpp"
#include "support/pickle_bytes.hpp"
#include "trace/pickle.hpp"
#include "trace/snapshot_options.hpp"

namespace fraglab {
namespace {

using pickle::Value;
using testing::from_hex;

// ---- reading both ways --------------------------------------------------------------------------

// A Trace, or the message it was refused with.
struct Outcome {
  std::optional<Trace> trace;
  std::string error;
  bool operator==(const Outcome&) const = default;
};

Outcome read_snapshot(std::string_view bytes, const pickle::PickleOptions& options, int device_index = -1) {
  TraceReadOptions read;
  read.device_index = device_index;
  try {
    return Outcome{parse_snapshot(bytes, "s.pickle", read, options), ""};
  } catch (const InputError& e) {
    return Outcome{std::nullopt, e.what()};
  }
}

// Streamed (the readers' options) and not (everything built: nothing streams without skip_key).
void expect_same_streamed_or_not(std::string_view bytes, int device_index = -1) {
  const Outcome streamed = read_snapshot(bytes, kSnapshotPickle, device_index);
  const Outcome built = read_snapshot(bytes, pickle::PickleOptions{}, device_index);
  EXPECT_EQ(streamed.error, built.error);
  EXPECT_TRUE(streamed == built);
}

// Counts what the streamed list took.
struct CountingSink final : pickle::EntrySink {
  std::size_t items = 0;
  std::size_t entries = 0;
  std::size_t discarded = 0;
  void take(std::span<const pickle::Value> taken) override {
    items += taken.size();
    for (const pickle::Value& v : taken) entries += v.is_streamed_entry() ? 1 : 0;
  }
  void discard() override {
    ++discarded;
    items = entries = 0;
  }
};

pickle::PickleOptions streaming(CountingSink& sink) {
  pickle::PickleOptions options = kSnapshotPickle;
  options.entry_sink = &sink;
  return options;
}

// ---- snapshots written by PickleWriter (batches of 1000, no memo) -------------------------------

constexpr std::int64_t kBase = 0x7f0000000000;

void write_entry(PickleWriter& w, std::string_view action, std::int64_t addr, std::int64_t size) {
  w.begin_dict();
  w.key("action");
  w.str(action);
  w.key("addr");
  w.integer(addr);
  w.key("size");
  w.integer(size);
  w.key("stream");
  w.integer(0);
  w.key("time_us");
  w.integer(7);
  w.key("frames");
  w.begin_list();
  w.end_list();
  w.end_dict();
}

// One 2 MiB segment, then `entries` trace entries: allocs each followed by its free_requested and
// free_completed (pairs fall across the 1000-item batches), padded with 'snapshot' entries.
std::string written_snapshot(std::size_t entries) {
  PickleWriter w;
  w.begin_dict();
  w.key("segments");
  w.begin_list();
  w.begin_dict();
  w.key("device");
  w.integer(0);
  w.key("address");
  w.integer(kBase);
  w.key("total_size");
  w.integer(2 << 20);
  w.key("stream");
  w.integer(0);
  w.key("segment_type");
  w.str("small");
  w.key("blocks");
  w.begin_list();
  w.begin_dict();
  w.key("address");
  w.integer(kBase);
  w.key("size");
  w.integer(2 << 20);
  w.key("state");
  w.str("inactive");
  w.end_dict();
  w.end_list();
  w.end_dict();
  w.end_list();
  w.key("device_traces");
  w.begin_list();
  w.begin_list();
  std::size_t written = 0;
  if (entries > 0) {
    write_entry(w, "segment_alloc", kBase, 2 << 20);
    ++written;
  }
  for (std::int64_t k = 0; written + 3 <= entries; ++k, written += 3) {
    const std::int64_t addr = kBase + 512 * (k % 64);
    write_entry(w, "alloc", addr, 512);
    write_entry(w, "free_requested", addr, 512);
    write_entry(w, "free_completed", addr, 512);
  }
  for (; written < entries; ++written) write_entry(w, "snapshot", 0, 0);
  w.end_list();
  w.end_list();
  w.end_dict();
  return w.finish();
}

TEST(SnapshotStream, WrittenSnapshotsStreamEveryEntryAndReadTheSame) {
  for (std::size_t n : {1u, 2u, 4u, 999u, 1000u, 1001u, 1002u, 2001u, 3500u}) {
    SCOPED_TRACE(n);
    const std::string bytes = written_snapshot(n);
    CountingSink sink;
    pickle::PickleDocument doc(bytes, "s.pickle", streaming(sink));
    EXPECT_NE(doc.streamed_lists(), nullptr);
    EXPECT_EQ(sink.items, n);
    EXPECT_EQ(sink.entries, n);
    const Outcome streamed = read_snapshot(bytes, kSnapshotPickle);
    ASSERT_TRUE(streamed.trace) << streamed.error;
    EXPECT_EQ(streamed.trace->source_entries, n);
    EXPECT_TRUE(streamed == read_snapshot(bytes, pickle::PickleOptions{}));
  }
}

// ---- snapshots pickled by CPython (protocol 4, memoized), by hand --------------------------------

// pickle.dumps(snapshot, 4) of one small segment and 7 entries: segment_alloc, then alloc,
// free_requested, free_completed at A and at A + 512 (A = 0x7f0000000000).
const char* const kPlainHex =
    "800495fc010000000000007d94288c087365676d656e7473945d947d94288c06646576696365944b008c0761646472657373"
    "948a0600000000007f8c0a746f74616c5f73697a65944a000020008c0673747265616d944b008c0c7365676d656e745f7479"
    "7065948c05736d616c6c948c06626c6f636b73945d947d942868058a0600000000007f8c0473697a65944a000020008c0573"
    "74617465948c08696e61637469766594756175618c0d6465766963655f747261636573945d945d94287d94288c0661637469"
    "6f6e948c0d7365676d656e745f616c6c6f63948c0461646472948a0600000000007f680d4a0000200068074b008c0774696d"
    "655f7573944b078c066672616d6573945d94757d942868148c05616c6c6f639468168a0600000000007f680d4d000268074b"
    "0068174b0768185d94757d942868148c0e667265655f7265717565737465649468168a0600000000007f680d4d000268074b"
    "0068174b0768185d94757d942868148c0e667265655f636f6d706c657465649468168a0600000000007f680d4d000268074b"
    "0068174b0768185d94757d94286814681b68168a0600020000007f680d4d000468074b0068174b0768185d94757d94286814"
    "681e68168a0600020000007f680d4d000468074b0068174b0768185d94757d94286814682168168a0600020000007f680d4d"
    "000468074b0068174b0768185d94756561752e";
// The same with the free_requested entry also under the root's key 'extra' (a memo GET of it from
// outside the list).
const char* const kEntryAlsoOutsideHex =
    "80049506020000000000007d94288c087365676d656e7473945d947d94288c06646576696365944b008c0761646472657373"
    "948a0600000000007f8c0a746f74616c5f73697a65944a000020008c0673747265616d944b008c0c7365676d656e745f7479"
    "7065948c05736d616c6c948c06626c6f636b73945d947d942868058a0600000000007f8c0473697a65944a000020008c0573"
    "74617465948c08696e61637469766594756175618c0d6465766963655f747261636573945d945d94287d94288c0661637469"
    "6f6e948c0d7365676d656e745f616c6c6f63948c0461646472948a0600000000007f680d4a0000200068074b008c0774696d"
    "655f7573944b078c066672616d6573945d94757d942868148c05616c6c6f639468168a0600000000007f680d4d000268074b"
    "0068174b0768185d94757d942868148c0e667265655f7265717565737465649468168a0600000000007f680d4d000268074b"
    "0068174b0768185d94757d942868148c0e667265655f636f6d706c657465649468168a0600000000007f680d4d000268074b"
    "0068174b0768185d94757d94286814681b68168a0600020000007f680d4d000468074b0068174b0768185d94757d94286814"
    "681e68168a0600020000007f680d4d000468074b0068174b0768185d94757d94286814682168168a0600020000007f680d4d"
    "000468074b0068174b0768185d947565618c05657874726194681d752e";
// kPlain with the alloc entry listed again at the end of the list (a memo GET inside it).
const char* const kEntryTwiceInListHex =
    "800495fe010000000000007d94288c087365676d656e7473945d947d94288c06646576696365944b008c0761646472657373"
    "948a0600000000007f8c0a746f74616c5f73697a65944a000020008c0673747265616d944b008c0c7365676d656e745f7479"
    "7065948c05736d616c6c948c06626c6f636b73945d947d942868058a0600000000007f8c0473697a65944a000020008c0573"
    "74617465948c08696e61637469766594756175618c0d6465766963655f747261636573945d945d94287d94288c0661637469"
    "6f6e948c0d7365676d656e745f616c6c6f63948c0461646472948a0600000000007f680d4a0000200068074b008c0774696d"
    "655f7573944b078c066672616d6573945d94757d942868148c05616c6c6f639468168a0600000000007f680d4d000268074b"
    "0068174b0768185d94757d942868148c0e667265655f7265717565737465649468168a0600000000007f680d4d000268074b"
    "0068174b0768185d94757d942868148c0e667265655f636f6d706c657465649468168a0600000000007f680d4d000268074b"
    "0068174b0768185d94757d94286814681b68168a0600020000007f680d4d000468074b0068174b0768185d94757d94286814"
    "681e68168a0600020000007f680d4d000468074b0068174b0768185d94757d94286814682168168a0600020000007f680d4d"
    "000468074b0068174b0768185d9475681a6561752e";
// kPlain with the entries list listed again as device 1 (a memo GET of the streamed list).
const char* const kListTwiceHex =
    "800495ff010000000000007d94288c087365676d656e7473945d947d94288c06646576696365944b008c0761646472657373"
    "948a0600000000007f8c0a746f74616c5f73697a65944a000020008c0673747265616d944b008c0c7365676d656e745f7479"
    "7065948c05736d616c6c948c06626c6f636b73945d947d942868058a0600000000007f8c0473697a65944a000020008c0573"
    "74617465948c08696e61637469766594756175618c0d6465766963655f747261636573945d94285d94287d94288c06616374"
    "696f6e948c0d7365676d656e745f616c6c6f63948c0461646472948a0600000000007f680d4a0000200068074b008c077469"
    "6d655f7573944b078c066672616d6573945d94757d942868148c05616c6c6f639468168a0600000000007f680d4d00026807"
    "4b0068174b0768185d94757d942868148c0e667265655f7265717565737465649468168a0600000000007f680d4d00026807"
    "4b0068174b0768185d94757d942868148c0e667265655f636f6d706c657465649468168a0600000000007f680d4d00026807"
    "4b0068174b0768185d94757d94286814681b68168a0600020000007f680d4d000468074b0068174b0768185d94757d942868"
    "14681e68168a0600020000007f680d4d000468074b0068174b0768185d94757d94286814682168168a0600020000007f680d"
    "4d000468074b0068174b0768185d947565681265752e";
// kPlain with the second alloc's 'frames' being the first alloc entry (a memo GET under the
// skipped key: nothing reads it).
const char* const kEntryUnderFramesHex =
    "800495fc010000000000007d94288c087365676d656e7473945d947d94288c06646576696365944b008c0761646472657373"
    "948a0600000000007f8c0a746f74616c5f73697a65944a000020008c0673747265616d944b008c0c7365676d656e745f7479"
    "7065948c05736d616c6c948c06626c6f636b73945d947d942868058a0600000000007f8c0473697a65944a000020008c0573"
    "74617465948c08696e61637469766594756175618c0d6465766963655f747261636573945d945d94287d94288c0661637469"
    "6f6e948c0d7365676d656e745f616c6c6f63948c0461646472948a0600000000007f680d4a0000200068074b008c0774696d"
    "655f7573944b078c066672616d6573945d94757d942868148c05616c6c6f639468168a0600000000007f680d4d000268074b"
    "0068174b0768185d94757d942868148c0e667265655f7265717565737465649468168a0600000000007f680d4d000268074b"
    "0068174b0768185d94757d942868148c0e667265655f636f6d706c657465649468168a0600000000007f680d4d000268074b"
    "0068174b0768185d94757d94286814681b68168a0600020000007f680d4d000468074b0068174b076818681a757d94286814"
    "681e68168a0600020000007f680d4d000468074b0068174b0768185d94757d94286814682168168a0600020000007f680d4d"
    "000468074b0068174b0768185d94756561752e";

TEST(SnapshotStream, CPythonSnapshotStreams) {
  const std::string bytes = from_hex(kPlainHex);
  CountingSink sink;
  pickle::PickleDocument doc(bytes, "s.pickle", streaming(sink));
  EXPECT_NE(doc.streamed_lists(), nullptr);
  EXPECT_EQ(sink.entries, 7u);
  const Outcome streamed = read_snapshot(bytes, kSnapshotPickle);
  ASSERT_TRUE(streamed.trace) << streamed.error;
  EXPECT_EQ(streamed.trace->source_entries, 7u);
  expect_same_streamed_or_not(bytes);
}

TEST(SnapshotStream, EntryFetchedFromOutsideTheListReadsAgainWithoutStreaming) {
  const std::string bytes = from_hex(kEntryAlsoOutsideHex);
  CountingSink sink;
  pickle::PickleDocument doc(bytes, "s.pickle", streaming(sink));
  // The GET into the root dict started the reader again, without streaming.
  EXPECT_EQ(doc.streamed_lists(), nullptr);
  EXPECT_EQ(sink.discarded, 1u);
  const Value* extra = doc.root().find("extra");
  ASSERT_NE(extra, nullptr);
  EXPECT_EQ(extra->find("action")->str(), "free_requested");
  const Outcome streamed = read_snapshot(bytes, kSnapshotPickle);
  EXPECT_TRUE(streamed.trace) << streamed.error;
  expect_same_streamed_or_not(bytes);
}

TEST(SnapshotStream, SharedEntriesAndListsReadAsWithoutStreaming) {
  for (const char* hex : {kEntryTwiceInListHex, kListTwiceHex, kEntryUnderFramesHex}) {
    const std::string bytes = from_hex(hex);
    for (int device : {-1, 0, 1}) {
      SCOPED_TRACE(device);
      expect_same_streamed_or_not(bytes, device);
    }
  }
}

// Every truncation and single-byte change of the CPython snapshot: refused with the same message
// or read into the same Trace, streamed or not. Each byte gets a bit flip and the opcodes that
// move values between the stack, the memo and containers.
TEST(SnapshotStream, EveryTruncationAndByteChangeReadsAsWithoutStreaming) {
  const std::string good = from_hex(kPlainHex);
  for (std::size_t n = 0; n < good.size(); ++n) {
    SCOPED_TRACE("prefix of " + std::to_string(n) + " bytes");
    expect_same_streamed_or_not(std::string_view(good).substr(0, n));
  }
  const unsigned char opcodes[] = {'e', 'a', 'u', 's', ']', '}', 'h', '(', 0x94, '2', '0', '1', 'l', 't', '.'};
  std::size_t read = 0;
  for (std::size_t i = 0; i < good.size(); ++i) {
    for (int k = -1; k < static_cast<int>(sizeof opcodes); ++k) {
      std::string bad = good;
      bad[i] = k < 0 ? static_cast<char>(good[i] ^ 1) : static_cast<char>(opcodes[k]);
      if (bad == good) continue;
      SCOPED_TRACE("byte " + std::to_string(i) + " set to " + std::to_string(static_cast<unsigned char>(bad[i])));
      expect_same_streamed_or_not(bad);
      read += read_snapshot(bad, kSnapshotPickle).trace ? 1 : 0;
    }
  }
  EXPECT_GT(read, 0u);  // not vacuous: some changes still read
}

}  // namespace
}  // namespace fraglab
