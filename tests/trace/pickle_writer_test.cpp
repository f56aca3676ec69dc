// fraglab::PickleWriter read back by fraglab's own pickle reader: the values written by hand come
// back as written, containers past a batch of 1000 items keep every item, and the opcodes used
// are the plain ones (no GLOBAL, REDUCE or memo).
#include <gtest/gtest.h>

#include <cstdint>
#include <limits>
#include <string>

#include "fraglab/pickle_writer.hpp"
#include "trace/pickle.hpp"

namespace fraglab {
namespace {

TEST(PickleWriter, ScalarsReadBackAsWritten) {
  PickleWriter w;
  w.begin_list();
  w.none();
  w.boolean(true);
  w.boolean(false);
  w.integer(0);
  w.integer(255);
  w.integer(256);
  w.integer(65536);
  w.integer(-1);
  w.integer(std::numeric_limits<std::int32_t>::min());
  w.integer(std::int64_t{1} << 40);
  w.integer(-(std::int64_t{1} << 40));
  w.integer(std::numeric_limits<std::int64_t>::min());
  w.unsigned_integer(std::numeric_limits<std::uint64_t>::max());
  w.real(0.8);
  w.str("segment_alloc");
  w.str("");
  w.end_list();
  const std::string bytes = w.finish();
  const pickle::PickleDocument doc(bytes, "test");
  const auto items = doc.root().items();
  ASSERT_EQ(items.size(), 16u);
  EXPECT_TRUE(items[0].is_none());
  EXPECT_EQ(items[1].kind, pickle::Kind::Bool);
  EXPECT_TRUE(items[1].boolean);
  EXPECT_FALSE(items[2].boolean);
  const std::int64_t ints[] = {0,
                               255,
                               256,
                               65536,
                               -1,
                               std::numeric_limits<std::int32_t>::min(),
                               std::int64_t{1} << 40,
                               -(std::int64_t{1} << 40),
                               std::numeric_limits<std::int64_t>::min()};
  for (std::size_t i = 0; i < 9; ++i) {
    EXPECT_EQ(items[3 + i].kind, pickle::Kind::Int) << i;
    EXPECT_EQ(items[3 + i].integer, ints[i]) << i;
  }
  EXPECT_EQ(items[12].kind, pickle::Kind::UInt);
  EXPECT_EQ(items[12].unsigned_integer, std::numeric_limits<std::uint64_t>::max());
  EXPECT_EQ(items[13].kind, pickle::Kind::Float);
  EXPECT_EQ(items[13].real, 0.8);
  EXPECT_EQ(items[14].str(), "segment_alloc");
  EXPECT_EQ(items[15].str(), "");
  EXPECT_EQ(doc.protocol(), 2);
}

TEST(PickleWriter, ContainersPastOneBatchKeepEveryItem) {
  PickleWriter w;
  w.begin_dict();
  w.key("list");
  w.begin_list();
  for (int i = 0; i < 2500; ++i) w.integer(i);
  w.end_list();
  w.key("dict");
  w.begin_dict();
  for (int i = 0; i < 1001; ++i) {
    w.key(std::to_string(i));
    w.integer(2 * i);
  }
  w.end_dict();
  w.key("pool");
  w.begin_tuple();
  w.integer(0);
  w.integer(7);
  w.end_tuple();
  w.key("empty");
  w.begin_list();
  w.end_list();
  w.end_dict();
  const std::string bytes = w.finish();
  const pickle::PickleDocument doc(bytes, "test");
  const pickle::Value& root = doc.root();
  ASSERT_TRUE(root.is_dict());
  EXPECT_EQ(root.dict_size(), 4u);
  const auto list = root.find("list")->items();
  ASSERT_EQ(list.size(), 2500u);
  for (int i = 0; i < 2500; ++i) ASSERT_EQ(list[i].integer, i);
  const pickle::Value& dict = *root.find("dict");
  ASSERT_EQ(dict.dict_size(), 1001u);
  EXPECT_EQ(dict.find("0")->integer, 0);
  EXPECT_EQ(dict.find("999")->integer, 1998);   // last pair of the first batch
  EXPECT_EQ(dict.find("1000")->integer, 2000);  // first pair of the second
  const pickle::Value& pool = *root.find("pool");
  EXPECT_EQ(pool.kind, pickle::Kind::Tuple);
  ASSERT_EQ(pool.items().size(), 2u);
  EXPECT_EQ(pool.items()[1].integer, 7);
  EXPECT_TRUE(root.find("empty")->items().empty());
}

TEST(PickleWriter, UnbalancedContainersAreAProgrammingError) {
  PickleWriter open;
  open.begin_list();
  EXPECT_THROW(open.finish(), std::logic_error);
  PickleWriter crossed;
  crossed.begin_dict();
  EXPECT_THROW(crossed.end_list(), std::logic_error);
}

}  // namespace
}  // namespace fraglab
