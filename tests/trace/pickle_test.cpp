// The safe pickle reader (src/trace/pickle.hpp): reference pickles written by CPython's own
// pickle module (protocols 0-5, bytes pasted below as hex), aliasing through the memo, and hostile
// or broken input, which must always end in an InputError (never a crash: run under ASan+UBSan).
#include "trace/pickle.hpp"

#include <gtest/gtest.h>

#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "fraglab/types.hpp"
#include "support/pickle_bytes.hpp"

namespace fraglab::pickle {
namespace {

using testing::B;
using testing::from_hex;

// The message of the InputError that parsing `bytes` throws ("" when it does not throw).
std::string parse_error(const std::string& bytes) {
  try {
    PickleDocument doc(bytes, "t.pickle");
  } catch (const InputError& e) {
    return e.what();
  }
  return "";
}

// CPython 3.11: pickle.dumps(v, protocol=p) for
//   shared = [1]
//   v = {'ints': [0, 1, -1, 255, 256, 65535, 65536, -2**31, 2**31-1, 2**31, 2**63-1, -2**63,
//                 2**64-1],
//        'f': [1.5, -0.25], 'b': [True, False, None],
//        's': ['h\u00e9llo \u20ac\U0001F600', '', 'a\\u0041'],
//        't': [(), (1,), (1, 2), (1, 2, 3), (1, 2, 3, 4)], 'shared': [shared, shared]}
const char* const kReference[6] = {
    // protocol 0: text opcodes (INT, LONG, FLOAT, UNICODE with raw-unicode-escape, PUT/GET, DICT,
    // LIST, TUPLE, SETITEM, APPEND)
    "286470300a56696e74730a70310a286c70320a49300a6149310a61492d310a61493235350a61493235360a61"
    "4936353533350a614936353533360a61492d323134373438333634380a6149323134373438333634370a614c"
    "323134373438333634384c0a614c393232333337323033363835343737353830374c0a614c2d393232333337"
    "323033363835343737353830384c0a614c31383434363734343037333730393535313631354c0a617356660a"
    "70330a286c70340a46312e350a61462d302e32350a617356620a70350a286c70360a4930310a614930300a61"
    "4e617356730a70370a286c70380a5668e96c6c6f205c75323061635c5530303031663630300a70390a61560a"
    "7031300a6156615c753030356375303034310a7031310a617356740a7031320a286c7031330a287461284931"
    "0a747031340a612849310a49320a747031350a612849310a49320a49330a747031360a612849310a49320a49"
    "330a49340a747031370a6173567368617265640a7031380a286c7031390a286c7032300a49310a6161673230"
    "0a61732e",
    // protocol 1: binary ints, BINUNICODE, BINPUT/BINGET, APPENDS/SETITEMS, text LONG for big ints
    "7d7100285804000000696e747371015d7102284b004b014affffffff4bff4d00014dffff4a000001004a0000"
    "00804affffff7f4c323134373438333634384c0a4c393232333337323033363835343737353830374c0a4c2d"
    "393232333337323033363835343737353830384c0a4c31383434363734343037333730393535313631354c0a"
    "6558010000006671035d710428473ff800000000000047bfd00000000000006558010000006271055d710628"
    "4930310a4930300a4e6558010000007371075d710828580e00000068c3a96c6c6f20e282acf09f9880710958"
    "00000000710a5807000000615c7530303431710b65580100000074710c5d710d2829284b0174710e284b014b"
    "0274710f284b014b024b03747110284b014b024b034b0474711165580600000073686172656471125d711328"
    "5d71144b0161681465752e",
    // protocol 2: PROTO, LONG1, NEWTRUE/NEWFALSE, TUPLE1-3
    "80027d7100285804000000696e747371015d7102284b004b014affffffff4bff4d00014dffff4a000001004a"
    "000000804affffff7f8a0500000080008a08ffffffffffffff7f8a0800000000000000808a09ffffffffffff"
    "ffff006558010000006671035d710428473ff800000000000047bfd00000000000006558010000006271055d"
    "71062888894e6558010000007371075d710828580e00000068c3a96c6c6f20e282acf09f9880710958000000"
    "00710a5807000000615c7530303431710b65580100000074710c5d710d28294b0185710e4b014b0286710f4b"
    "014b024b03877110284b014b024b034b0474711165580600000073686172656471125d7113285d71144b0161"
    "681465752e",
    // protocol 3
    "80037d7100285804000000696e747371015d7102284b004b014affffffff4bff4d00014dffff4a000001004a"
    "000000804affffff7f8a0500000080008a08ffffffffffffff7f8a0800000000000000808a09ffffffffffff"
    "ffff006558010000006671035d710428473ff800000000000047bfd00000000000006558010000006271055d"
    "71062888894e6558010000007371075d710828580e00000068c3a96c6c6f20e282acf09f9880710958000000"
    "00710a5807000000615c7530303431710b65580100000074710c5d710d28294b0185710e4b014b0286710f4b"
    "014b024b03877110284b014b024b034b0474711165580600000073686172656471125d7113285d71144b0161"
    "681465752e",
    // protocol 4: FRAME, SHORT_BINUNICODE, MEMOIZE
    "800495db000000000000007d94288c04696e7473945d94284b004b014affffffff4bff4d00014dffff4a0000"
    "01004a000000804affffff7f8a0500000080008a08ffffffffffffff7f8a0800000000000000808a09ffffff"
    "ffffffffff00658c0166945d9428473ff800000000000047bfd0000000000000658c0162945d942888894e65"
    "8c0173945d94288c0e68c3a96c6c6f20e282acf09f9880948c00948c07615c753030343194658c0174945d94"
    "28294b0185944b014b0286944b014b024b038794284b014b024b034b047494658c06736861726564945d9428"
    "5d944b0161681465752e",
    // protocol 5
    "800595db000000000000007d94288c04696e7473945d94284b004b014affffffff4bff4d00014dffff4a0000"
    "01004a000000804affffff7f8a0500000080008a08ffffffffffffff7f8a0800000000000000808a09ffffff"
    "ffffffffff00658c0166945d9428473ff800000000000047bfd0000000000000658c0162945d942888894e65"
    "8c0173945d94288c0e68c3a96c6c6f20e282acf09f9880948c00948c07615c753030343194658c0174945d94"
    "28294b0185944b014b0286944b014b024b038794284b014b024b034b047494658c06736861726564945d9428"
    "5d944b0161681465752e",
};

std::int64_t int_of(const Value& v) {
  EXPECT_EQ(v.kind, Kind::Int);
  return v.integer;
}

void expect_reference_value(const Value& root, int protocol) {
  SCOPED_TRACE("protocol " + std::to_string(protocol));
  ASSERT_TRUE(root.is_dict());
  EXPECT_EQ(root.dict_size(), 6u);

  const Value* ints = root.find("ints");
  ASSERT_NE(ints, nullptr);
  auto n = ints->items();
  ASSERT_EQ(n.size(), 13u);
  EXPECT_EQ(int_of(n[0]), 0);
  EXPECT_EQ(int_of(n[1]), 1);
  EXPECT_EQ(int_of(n[2]), -1);
  EXPECT_EQ(int_of(n[3]), 255);
  EXPECT_EQ(int_of(n[4]), 256);
  EXPECT_EQ(int_of(n[5]), 65535);
  EXPECT_EQ(int_of(n[6]), 65536);
  EXPECT_EQ(int_of(n[7]), -2147483648LL);
  EXPECT_EQ(int_of(n[8]), 2147483647LL);
  EXPECT_EQ(int_of(n[9]), 2147483648LL);
  EXPECT_EQ(int_of(n[10]), INT64_MAX);
  EXPECT_EQ(int_of(n[11]), INT64_MIN);
  EXPECT_EQ(n[12].kind, Kind::UInt);
  EXPECT_EQ(n[12].unsigned_integer, UINT64_MAX);

  auto f = root.find("f")->items();
  ASSERT_EQ(f.size(), 2u);
  EXPECT_EQ(f[0].kind, Kind::Float);
  EXPECT_EQ(f[0].real, 1.5);
  EXPECT_EQ(f[1].real, -0.25);

  auto b = root.find("b")->items();
  ASSERT_EQ(b.size(), 3u);
  EXPECT_EQ(b[0].kind, Kind::Bool);
  EXPECT_TRUE(b[0].boolean);
  EXPECT_EQ(b[1].kind, Kind::Bool);
  EXPECT_FALSE(b[1].boolean);
  EXPECT_TRUE(b[2].is_none());

  auto s = root.find("s")->items();
  ASSERT_EQ(s.size(), 3u);
  EXPECT_EQ(s[0].str(), "h\xc3\xa9llo \xe2\x82\xac\xf0\x9f\x98\x80");
  EXPECT_EQ(s[1].str(), "");
  EXPECT_EQ(s[2].str(), "a\\u0041");  // a literal backslash, not an escape

  auto t = root.find("t")->items();
  ASSERT_EQ(t.size(), 5u);
  for (std::size_t i = 0; i < 5; ++i) {
    ASSERT_EQ(t[i].kind, Kind::Tuple);
    auto items = t[i].items();
    ASSERT_EQ(items.size(), i);
    for (std::size_t k = 0; k < i; ++k) EXPECT_EQ(int_of(items[k]), static_cast<int>(k + 1));
  }

  // [shared, shared]: one list object reached twice through the memo.
  auto shared = root.find("shared")->items();
  ASSERT_EQ(shared.size(), 2u);
  ASSERT_EQ(shared[0].kind, Kind::List);
  EXPECT_EQ(shared[0].list, shared[1].list);
  ASSERT_EQ(shared[0].items().size(), 1u);
  EXPECT_EQ(int_of(shared[0].items()[0]), 1);
}

TEST(Pickle, ReadsCPythonReferencePicklesOfEveryProtocol) {
  for (int p = 0; p <= 5; ++p) {
    std::string bytes = from_hex(kReference[p]);
    PickleDocument doc(bytes, "ref.pickle");
    EXPECT_EQ(doc.protocol(), p < 2 ? 0 : p);
    expect_reference_value(doc.root(), p);
  }
}

TEST(Pickle, ReadsBytesAndBytearray) {
  // pickle.dumps(b'\x00\x01', 3), (b'\x00\x01', 4), (bytearray(b'ab'), 5)
  for (const char* hex : {"80034302000171002e", "800495060000000000000043020001942e"}) {
    std::string bytes = from_hex(hex);
    PickleDocument doc(bytes, "b.pickle");
    ASSERT_EQ(doc.root().kind, Kind::Bytes);
    EXPECT_EQ(doc.root().str(), B("\x00\x01"));
  }
  std::string ba = from_hex("8005950d000000000000009602000000000000006162942e");
  PickleDocument doc(ba, "b.pickle");
  ASSERT_EQ(doc.root().kind, Kind::Bytes);
  EXPECT_EQ(doc.root().str(), "ab");
  // BINBYTES (4-byte length) and BINBYTES8 by hand.
  std::string b4 =
      B("\x80\x03"
        "B\x03\x00\x00\x00xyz.");
  PickleDocument d4(b4, "b.pickle");
  EXPECT_EQ(d4.root().str(), "xyz");
  std::string b8 = B("\x80\x04\x8e\x02\x00\x00\x00\x00\x00\x00\x00hi.");
  PickleDocument d8(b8, "b.pickle");
  EXPECT_EQ(d8.root().str(), "hi");
}

TEST(Pickle, LongStringOpcodes) {
  std::string text(300, 'x');
  std::string p = B("\x80\x04X\x2c\x01\x00\x00") + text + ".";  // BINUNICODE
  PickleDocument doc(p, "s.pickle");
  EXPECT_EQ(doc.root().str(), text);
  std::string p8 = B("\x80\x04\x8d\x2c\x01\x00\x00\x00\x00\x00\x00") + text + ".";
  PickleDocument doc8(p8, "s.pickle");
  EXPECT_EQ(doc8.root().str(), text);
  // Python 2 strings (BINSTRING, SHORT_BINSTRING) decode as ASCII, as Python 3 does by default.
  std::string p2 = B("\x80\x02U\x02okT\x01\x00\x00\x00z\x86.");
  PickleDocument d2(p2, "s.pickle");
  ASSERT_EQ(d2.root().items().size(), 2u);
  EXPECT_EQ(d2.root().items()[0].str(), "ok");
  EXPECT_EQ(d2.root().items()[1].str(), "z");
}

TEST(Pickle, MemoAliasingSeesLaterAppends) {
  // L = []; t = (L, L); then L.append(1) after both references were taken:
  // EMPTY_LIST BINPUT 0 BINGET 0 TUPLE2 BINPUT 1 BINGET 0 BININT1 1 APPEND POP STOP.
  // CPython's pickle.loads gives ([1], [1]).
  std::string bytes = from_hex("80025d7100680086710168004b0161302e");
  PickleDocument doc(bytes, "alias.pickle");
  auto t = doc.root().items();
  ASSERT_EQ(t.size(), 2u);
  EXPECT_EQ(t[0].list, t[1].list);
  ASSERT_EQ(t[0].items().size(), 1u);
  EXPECT_EQ(t[0].items()[0].integer, 1);
}

TEST(Pickle, SelfReferentialListDoesNotLoop) {
  // l = []; l.append(l): EMPTY_LIST BINPUT 0 BINGET 0 APPEND STOP
  std::string bytes = from_hex("80025d71006800612e");
  PickleDocument doc(bytes, "self.pickle");
  ASSERT_EQ(doc.root().items().size(), 1u);
  EXPECT_EQ(doc.root().items()[0].list, doc.root().list);
}

TEST(Pickle, DuplicateDictKeysLastWins) {
  // {'a': 1, 'a': 2} written with SETITEMS, as Python would hold it: {'a': 2}.
  std::string bytes =
      B("\x80\x04}(\x8c\x01"
        "aK\x01\x8c\x01"
        "aK\x02u.");
  PickleDocument doc(bytes, "dup.pickle");
  ASSERT_NE(doc.root().find("a"), nullptr);
  EXPECT_EQ(doc.root().find("a")->integer, 2);
  EXPECT_EQ(doc.root().find("b"), nullptr);
}

TEST(Pickle, TrailingBytesAfterStopAreIgnored) {
  std::string bytes = B("\x80\x02K\x07.garbage");
  PickleDocument doc(bytes, "t.pickle");
  EXPECT_EQ(doc.root().integer, 7);
}

TEST(Pickle, PopAndDupFollowPython) {
  // MARK POP (pops the MARK itself, as Python does when nothing is above it) NONE DUP TUPLE2.
  std::string bytes = B("\x80\x02(0N2\x86.");
  PickleDocument doc(bytes, "t.pickle");
  ASSERT_EQ(doc.root().items().size(), 2u);
  EXPECT_TRUE(doc.root().items()[1].is_none());
  // POP_MARK drops everything since the MARK.
  std::string pm =
      B("\x80\x02K\x01(K\x02K\x03"
        "1.");
  PickleDocument d2(pm, "t.pickle");
  EXPECT_EQ(d2.root().integer, 1);
}

TEST(Pickle, IntegerEdges) {
  struct Case {
    std::string bytes;
    Kind kind;
    std::uint64_t bits;
  };
  std::vector<Case> cases = {
      {B("\x80\x02\x8a\x00."), Kind::Int, 0},  // LONG1 of zero bytes = 0
      {B("\x80\x02\x8a\x01\xff."), Kind::Int, static_cast<std::uint64_t>(-1)},
      {B("\x80\x02\x8a\x09\x00\x00\x00\x00\x00\x00\x00\x80\x00."), Kind::UInt, std::uint64_t{1} << 63},
      {B("\x80\x02\x8a\x09\x00\x00\x00\x00\x00\x00\x00\x80\xff."), Kind::Int,
       std::uint64_t{1} << 63},                                      // -2^63 with a redundant sign byte
      {B("\x80\x02\x8b\x02\x00\x00\x00\x01\x01."), Kind::Int, 257},  // LONG4
      {B("\x80\x02M\xff\xff."), Kind::Int, 65535},
      {B("I-12\n."), Kind::Int, static_cast<std::uint64_t>(-12)},
      {B("L18446744073709551615L\n."), Kind::UInt, UINT64_MAX},
  };
  for (const Case& c : cases) {
    PickleDocument doc(c.bytes, "i.pickle");
    EXPECT_EQ(doc.root().kind, c.kind);
    EXPECT_EQ(doc.root().unsigned_integer, c.bits);
  }
  // Wider than 64 bits: refused, not truncated.
  EXPECT_NE(parse_error(B("\x80\x02\x8a\x09\xff\xff\xff\xff\xff\xff\xff\xff\x01.")).find("does not fit in 64 bits"),
            std::string::npos);
  EXPECT_NE(parse_error(B("\x80\x02\x8a\x09\x00\x00\x00\x00\x00\x00\x00\x00\xff.")).find("below -2^63"),
            std::string::npos);
  EXPECT_NE(parse_error("L123456789012345678901234567890L\n.").find("64 bits"), std::string::npos);
}

TEST(Pickle, Utf8IsValidated) {
  // Overlong encoding of '/' (C0 AF) is refused; a lone surrogate (ED A0 80) is allowed, as
  // Python's surrogatepass reader allows it.
  EXPECT_NE(parse_error(B("\x80\x04\x8c\x02\xc0\xaf.")).find("UTF-8"), std::string::npos);
  EXPECT_NE(parse_error(B("\x80\x04\x8c\x01\xc3.")).find("UTF-8"), std::string::npos);
  std::string ok = B("\x80\x04\x8c\x03\xed\xa0\x80.");
  PickleDocument doc(ok, "u.pickle");
  EXPECT_EQ(doc.root().str().size(), 3u);
  EXPECT_NE(parse_error(B("\x80\x04\x8c\x01\xff.")).find("UTF-8"), std::string::npos);
}

// ---- hostile input ---------------------------------------------------------------------------

TEST(PickleHostile, ClassicGlobalReduceIsRefusedNotRun) {
  std::string msg = parse_error("cos\nsystem\n(S'echo hi'\ntR.");
  EXPECT_NE(msg.find("t.pickle"), std::string::npos) << msg;
  EXPECT_NE(msg.find("byte 0"), std::string::npos) << msg;
  EXPECT_NE(msg.find("GLOBAL"), std::string::npos) << msg;
  EXPECT_NE(msg.find("refused"), std::string::npos) << msg;
  EXPECT_EQ(msg.find('\n'), std::string::npos) << "one line";
}

TEST(PickleHostile, StackGlobalIsRefused) {
  // pickle.dumps(os.system, 4) shape: PROTO 4, 'posix', 'system', STACK_GLOBAL at byte 19.
  std::string bytes = B("\x80\x04\x8c\x05posix\x94\x8c\x06system\x94\x93\x94.");
  std::string msg = parse_error(bytes);
  EXPECT_NE(msg.find("STACK_GLOBAL"), std::string::npos) << msg;
  EXPECT_NE(msg.find("byte 19"), std::string::npos) << msg;
}

TEST(PickleHostile, EveryObjectOpcodeIsRefusedByName) {
  struct Case {
    unsigned char op;
    const char* name;
  };
  const Case cases[] = {{'c', "GLOBAL"}, {0x93, "STACK_GLOBAL"}, {'R', "REDUCE"},  {'b', "BUILD"},
                        {'i', "INST"},   {'o', "OBJ"},           {0x81, "NEWOBJ"}, {0x92, "NEWOBJ_EX"},
                        {'P', "PERSID"}, {'Q', "BINPERSID"},     {0x82, "EXT1"},   {0x83, "EXT2"},
                        {0x84, "EXT4"}};
  for (const Case& c : cases) {
    // Arguments follow, so that nothing but the opcode itself can cause the refusal.
    std::string bytes = B("\x80\x02NN") + static_cast<char>(c.op) + B("os\nsystem\n\x01\x01\x01\x01.");
    std::string msg = parse_error(bytes);
    EXPECT_NE(msg.find(std::string("opcode ") + c.name + " "), std::string::npos) << msg;
    EXPECT_NE(msg.find("byte 4"), std::string::npos) << msg;
    EXPECT_NE(msg.find("refused"), std::string::npos) << msg;
  }
}

TEST(PickleHostile, UnknownAndUnsupportedOpcodes) {
  std::string msg = parse_error(B("\x80\x02\xff."));
  EXPECT_NE(msg.find("byte 2"), std::string::npos) << msg;
  EXPECT_NE(msg.find("0xff"), std::string::npos) << msg;
  EXPECT_NE(msg.find("unknown opcode"), std::string::npos) << msg;
  msg = parse_error(B("\x80\x04\x8f."));  // EMPTY_SET
  EXPECT_NE(msg.find("EMPTY_SET"), std::string::npos) << msg;
  msg = parse_error(B("\x80\x05\x97."));  // NEXT_BUFFER (out-of-band data)
  EXPECT_NE(msg.find("NEXT_BUFFER"), std::string::npos) << msg;
  msg = parse_error(B("\x80\x06N."));
  EXPECT_NE(msg.find("unsupported pickle protocol 6"), std::string::npos) << msg;
}

// Every proper prefix of a valid pickle lacks its STOP: each must be an InputError. The prefix is
// copied into a buffer of exactly its size so that ASan sees any read past its end.
void expect_every_prefix_fails(const std::string& whole) {
  for (std::size_t n = 0; n < whole.size(); ++n) {
    std::unique_ptr<char[]> buf(new char[n ? n : 1]);
    if (n) std::memcpy(buf.get(), whole.data(), n);
    try {
      PickleDocument doc(std::string_view(buf.get(), n), "cut.pickle");
      ADD_FAILURE() << "prefix of " << n << " bytes parsed";
    } catch (const InputError& e) {
      EXPECT_NE(std::string(e.what()).find("cut.pickle: pickle byte "), std::string::npos) << e.what();
    }
  }
}

TEST(PickleHostile, TruncationAtEveryByteOffset) {
  for (int p = 0; p <= 5; ++p) {
    SCOPED_TRACE("protocol " + std::to_string(p));
    expect_every_prefix_fails(from_hex(kReference[p]));
  }
  expect_every_prefix_fails(from_hex("8005950d000000000000009602000000000000006162942e"));
}

TEST(PickleHostile, BadMemoIndices) {
  EXPECT_NE(parse_error(B("\x80\x02h\x05.")).find("memo index 5"), std::string::npos);
  EXPECT_NE(parse_error(B("\x80\x02j\xff\xff\xff\xff.")).find("memo index 4294967295"), std::string::npos);
  EXPECT_NE(parse_error("g7\n.").find("memo index 7"), std::string::npos);
  EXPECT_NE(parse_error("gx\n.").find("decimal memo index"), std::string::npos);
  // A PUT far beyond anything the input could need would make us allocate gigabytes: refused.
  EXPECT_NE(parse_error(B("\x80\x02Nr\xff\xff\xff\x7f.")).find("beyond"), std::string::npos);
  // A PUT with nothing to store.
  EXPECT_NE(parse_error(B("\x80\x02q\x00N.")).find("stack underflow"), std::string::npos);
  // A sparse (but bounded) PUT followed by GET of an unset slot in between.
  EXPECT_NE(parse_error(B("\x80\x02Nq\x05h\x03.")).find("memo index 3"), std::string::npos);
}

TEST(PickleHostile, HugeLengthFields) {
  const std::string cases[] = {
      B("\x80\x04X\xff\xff\xff\xff"
        "abc."),  // BINUNICODE
      B("\x80\x04\x8d\x00\x00\x00\x00\x00\x00\x00\x80"
        "abc."),  // BINUNICODE8
      B("\x80\x04\x8e\xff\xff\xff\xff\xff\xff\xff\xff"
        "abc."),  // BINBYTES8
      B("\x80\x05\x96\xff\xff\xff\xff\xff\xff\xff\x7f"
        "abc."),  // BYTEARRAY8
      B("\x80\x04\x95\xff\xff\xff\xff\xff\xff\xff\xff"
        "N."),                                 // FRAME
      B("\x80\x02\x8b\xff\xff\xff\x7f\x01."),  // LONG4
      B("\x80\x02\x8b\xff\xff\xff\xff\x01."),  // LONG4 < 0
      B("\x80\x04\x8c\xc8"
        "abc."),  // SHORT_BINUNICODE
      B("\x80\x03"
        "B\xff\xff\xff\xff."),          // BINBYTES
      B("\x80\x02T\xff\xff\xff\x7f."),  // BINSTRING
  };
  for (const std::string& c : cases) {
    std::string msg = parse_error(c);
    EXPECT_FALSE(msg.empty());
    EXPECT_NE(msg.find("pickle byte 2"), std::string::npos) << msg;
  }
}

TEST(PickleHostile, StackMisuse) {
  struct Case {
    std::string bytes;
    const char* expected;
  };
  const Case cases[] = {
      {B("\x80\x02"
         "a."),
       "stack underflow"},                          // APPEND, empty
      {B("\x80\x02]K\x01(a."), "stack underflow"},  // APPEND across MARK
      {B("\x80\x02K\x01t."), "MARK missing"},       // TUPLE without MARK
      {B("\x80\x02(K\x01"
         "e."),
       "no list below the MARK"},                       // APPENDS
      {B("\x80\x02}(K\x01u."), "odd number"},           // SETITEMS
      {B("\x80\x02]K\x01K\x02s."), "expected a dict"},  // SETITEM on a list
      {B("\x80\x02}K\x01"
         "a."),
       "expected a list"},                     // APPEND to a dict
      {B("\x80\x02}]K\x01s."), "unhashable"},  // list as a key
      {B("\x80\x02."), "stack underflow"},     // STOP, empty
      {B("\x80\x02(."), "stack underflow"},    // STOP above MARK
      {B("\x80\x02"
         "0."),
       "MARK missing"},  // POP, empty
      {B("\x80\x02"
         "1."),
       "MARK missing"},                              // POP_MARK
      {B("\x80\x02K\x01\x87."), "stack underflow"},  // TUPLE3 of one
      {B("\x80\x02"
         "2."),
       "stack underflow"},      // DUP, empty
      {B(""), "byte 0"},        // nothing at all
      {B("N"), "before STOP"},  // no STOP
  };
  for (const Case& c : cases) {
    std::string msg = parse_error(c.bytes);
    EXPECT_NE(msg.find(c.expected), std::string::npos) << "got: " << msg;
  }
}

TEST(PickleHostile, TextOpcodeArgumentsAreChecked) {
  EXPECT_NE(parse_error("Iabc\n.").find("decimal integer"), std::string::npos);
  EXPECT_NE(parse_error("F1.5x\n.").find("decimal float"), std::string::npos);
  EXPECT_NE(parse_error("I12").find("newline"), std::string::npos);
  EXPECT_NE(parse_error("V\\u12\n.").find("\\uXXXX"), std::string::npos);
  EXPECT_NE(parse_error("V\\U00110000\n.").find("U+10FFFF"), std::string::npos);
  EXPECT_NE(parse_error(B("\x80\x02U\x01\xe9.")).find("ASCII"), std::string::npos);
}

TEST(PickleHostile, EverySingleByteMutationIsSafe) {
  // Each byte of two reference pickles replaced by each of 256 values: the result either parses
  // or is an InputError; never a crash, hang or other exception (ASan/UBSan watch the rest).
  for (int p : {2, 4}) {
    const std::string good = from_hex(kReference[p]);
    std::size_t parsed = 0, refused = 0;
    for (std::size_t i = 0; i < good.size(); ++i) {
      for (int b = 0; b < 256; ++b) {
        std::string bad = good;
        bad[i] = static_cast<char>(b);
        std::unique_ptr<char[]> buf(new char[bad.size()]);
        std::memcpy(buf.get(), bad.data(), bad.size());
        try {
          PickleDocument doc(std::string_view(buf.get(), bad.size()), "m.pickle");
          ++parsed;
        } catch (const InputError&) {
          ++refused;
        }
      }
    }
    EXPECT_EQ(parsed + refused, good.size() * 256);
    EXPECT_GT(refused, 0u);
  }
}

TEST(PickleFastPaths, RunsOfMemoGetsReportTheRightOpcode) {
  // A run of GETs (the frames fast path) with a bad index in the middle: the error names that
  // GET's own offset. EMPTY_LIST MEMOIZE MARK BINGET 0 BINGET 0 LONG_BINGET 9 ...
  std::string bytes =
      B("\x80\x04]\x94(h\x00h\x00j\x09\x00\x00\x00h\x00"
        "e.");
  std::string msg = parse_error(bytes);
  EXPECT_NE(msg.find("pickle byte 9: opcode LONG_BINGET"), std::string::npos) << msg;
  EXPECT_NE(msg.find("memo index 9"), std::string::npos) << msg;
  // A run cut short by the end of the input.
  msg = parse_error(B("\x80\x04]\x94(h\x00h\x00j\x00\x00"));
  EXPECT_NE(msg.find("pickle byte 9: opcode LONG_BINGET"), std::string::npos) << msg;
  EXPECT_NE(msg.find("truncated"), std::string::npos) << msg;
  // A valid run builds the list.
  std::string ok =
      B("\x80\x04]\x94(h\x00h\x00j\x00\x00\x00\x00"
        "e.");
  PickleDocument doc(ok, "g.pickle");
  ASSERT_EQ(doc.root().items().size(), 3u);
  EXPECT_EQ(doc.root().items()[2].list, doc.root().list);
}

TEST(PickleFastPaths, RepeatedGetRunsDecodeLikeNewOnes) {
  // take_get_run() remembers a run of GETs by its bytes and skips decoding it when the same bytes
  // come again. Each list below must still hold exactly what its own GETs name.
  // Memo: 0 = the outer list, k = the int k-1 for k = 1..20 (BININT1 i MEMOIZE).
  std::string bytes = B("\x80\x04]\x94(");
  for (int i = 0; i < 20; ++i) bytes += std::string("K") + char(i) + "\x94";
  auto gets = [](std::initializer_list<int> slots) {
    std::string run;
    for (int k : slots) run += std::string("h") + char(k);
    return run;
  };
  auto list = [](const std::string& run) { return "]\x94(" + run + "e"; };
  const std::string run16 = gets({1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16});
  bytes += list(run16);                             // A: ints 0..15
  bytes += list(run16);                             // B: the same bytes
  bytes += list(run16 + gets({17}));                // C: one GET more
  bytes += list(run16.substr(0, 30) + gets({20}));  // D: last GET differs
  bytes += list(run16.substr(0, 8) + std::string("j\x13\x00\x00\x00", 5) + run16.substr(8));
  bytes += "e.";  // E: a LONG_BINGET
  PickleDocument doc(bytes, "runs.pickle");
  const auto items = doc.root().items();
  ASSERT_EQ(items.size(), 25u);
  auto ints = [](const Value& l) {
    std::vector<std::int64_t> out;
    for (const Value& v : l.items()) out.push_back(v.kind == Kind::Int ? v.integer : -100);
    return out;
  };
  std::vector<std::int64_t> a;
  a.reserve(16);
  for (int i = 0; i < 16; ++i) a.push_back(i);
  EXPECT_EQ(ints(items[20]), a);
  EXPECT_EQ(ints(items[21]), a);
  std::vector<std::int64_t> c = a;
  c.push_back(16);
  EXPECT_EQ(ints(items[22]), c);
  std::vector<std::int64_t> d = a;
  d.back() = 19;
  EXPECT_EQ(ints(items[23]), d);
  std::vector<std::int64_t> e = a;
  e.insert(e.begin() + 4, 18);
  EXPECT_EQ(ints(items[24]), e);
  // Without the ints, the run names unset slots: memo holds only the outer list (0) and the new
  // list (1), so the second GET (byte 10) fails, and the failed run is not remembered.
  std::string bad = B("\x80\x04]\x94(") + list(run16) + list(run16) + "e.";
  EXPECT_NE(parse_error(bad).find("pickle byte 10: opcode BINGET (0x68): memo index 2 was never"), std::string::npos)
      << parse_error(bad);
}

TEST(PickleFastPaths, RunsWithAnAppendsByteInsideAnIndexDecodeRight) {
  // take_get_run() keys a run by its bytes up to where it guesses the list ends, at an APPENDS
  // byte ('e', 0x65). LONG_BINGET 0x165 holds that byte inside its index; runs that share the
  // bytes up to it and differ after must each decode as their own GETs say, also when seen again,
  // and also when the list ends at the very end of the input.
  // Memo: 0 = the outer list, k = the int k-1 for k = 1..0x170.
  std::string bytes = B("\x80\x04]\x94(");
  for (int i = 0; i < 0x170; ++i) {  // BININT2 i, MEMOIZE
    bytes += 'M';
    bytes += static_cast<char>(i & 0xff);
    bytes += static_cast<char>(i >> 8);
    bytes += '\x94';
  }
  const std::string shared = B("h\x01h\x02h\x03j\x65\x01\x00\x00");
  const std::string run_a = shared + B("h\x04h\x05h\x06");
  const std::string run_b = shared + B("h\x07h\x08j\x66\x01\x00\x00");
  auto list = [](const std::string& run) { return "]\x94(" + run + "e"; };
  bytes += list(run_a) + list(run_b) + list(run_a) + list(run_b) + "e.";
  PickleDocument doc(bytes, "inner.pickle");
  const auto items = doc.root().items();
  ASSERT_EQ(items.size(), 0x170u + 4);
  auto ints = [](const Value& l) {
    std::vector<std::int64_t> out;
    for (const Value& v : l.items()) out.push_back(v.kind == Kind::Int ? v.integer : -1);
    return out;
  };
  const std::vector<std::int64_t> a{0, 1, 2, 0x164, 3, 4, 5}, b{0, 1, 2, 0x164, 6, 7, 0x165};
  EXPECT_EQ(ints(items[0x170]), a);
  EXPECT_EQ(ints(items[0x171]), b);
  EXPECT_EQ(ints(items[0x172]), a);
  EXPECT_EQ(ints(items[0x173]), b);
}

TEST(PickleFastPaths, ManyDistinctRunsSeenInTurnEachDecodeAsTheirOwn) {
  // More distinct runs than the run memo has sets, each seen three times in a scrambled order:
  // runs that share a set evict each other or are found in the second way (and moved first).
  // Whatever the memo remembers, each list must hold what its own GETs name. Each list is
  // followed by NONE POP NONE POP, so its APPENDS is where the run's key ends.
  // Memo: 0 = the outer list, k = the int k-1 for k = 1..40.
  std::string bytes = B("\x80\x04]\x94(");
  for (int i = 0; i < 40; ++i) bytes += std::string("K") + static_cast<char>(i) + "\x94";
  constexpr int kRuns = 1500, kGets = 12;
  std::vector<std::vector<int>> runs(kRuns);
  std::uint64_t state = 12345;
  auto next = [&state] {  // a fixed LCG: the same input every time
    state = state * 6364136223846793005ull + 1442695040888963407ull;
    return static_cast<int>(state >> 33);
  };
  for (auto& run : runs)
    for (int g = 0; g < kGets; ++g) run.push_back(1 + next() % 40);
  std::vector<int> order;
  for (int seen = 0; seen < 3; ++seen)
    for (int r = 0; r < kRuns; ++r) order.push_back((r * 7 + seen * 311 + next() % 5) % kRuns);
  for (int r : order) {
    bytes += "]\x94(";
    for (int slot : runs[r]) bytes += std::string("h") + static_cast<char>(slot);
    bytes += "eN0N0";
  }
  bytes += "e.";
  PickleDocument doc(bytes, "many.pickle");
  const auto items = doc.root().items();
  ASSERT_EQ(items.size(), 40 + order.size());
  for (std::size_t i = 0; i < order.size(); ++i) {
    const auto got = items[40 + i].items();
    ASSERT_EQ(got.size(), static_cast<std::size_t>(kGets)) << "list " << i;
    for (int g = 0; g < kGets; ++g) ASSERT_EQ(got[g].integer, runs[order[i]][g] - 1) << "list " << i << " item " << g;
  }
}

TEST(PickleFastPaths, FlatDictsReadLikeAnyOther) {
  // CPython 3.11, pickle.dumps(v, protocol=4) for
  //   [{'a': 1, 'b': 'x', 'c': None, 'd': True, 'e': 2**40, 'f': -5, 'g': 300, 'h': 70000,
  //     '': []},
  //    {'a': 2, 'b': 'x', 'frames': []}]
  // Both dicts are flat (take_flat_dict); the second fetches 'a', 'b' and 'x' from the memo.
  // The '' key with a list value must be built even though the skip key test meets an empty
  // string there; without skip_key nothing is skipped, not even 'frames'.
  const std::string bytes = from_hex(
      "80049562000000000000005d94287d94288c0161944b018c0162948c0178948c0163944e8c016494888c01"
      "65948a060000000000018c0166944afbffffff8c0167944d2c018c0168944a701101008c00945d94757d94"
      "2868024b02680368048c066672616d6573945d9475652e");
  PickleDocument doc(bytes, "flat.pickle");
  ASSERT_EQ(doc.root().items().size(), 2u);
  const Value& d0 = doc.root().items()[0];
  const Value& d1 = doc.root().items()[1];
  ASSERT_EQ(d0.dict_size(), 9u);
  EXPECT_EQ(d0.find("a")->integer, 1);
  EXPECT_EQ(d0.find("b")->str(), "x");
  EXPECT_TRUE(d0.find("c")->is_none());
  EXPECT_EQ(d0.find("d")->kind, Kind::Bool);
  EXPECT_TRUE(d0.find("d")->boolean);
  EXPECT_EQ(d0.find("e")->integer, std::int64_t{1} << 40);
  EXPECT_EQ(d0.find("f")->integer, -5);
  EXPECT_EQ(d0.find("g")->integer, 300);
  EXPECT_EQ(d0.find("h")->integer, 70000);
  EXPECT_EQ(d0.find("")->kind, Kind::List);
  ASSERT_EQ(d1.dict_size(), 3u);
  EXPECT_EQ(d1.find("a")->integer, 2);
  EXPECT_EQ(d1.find("b")->str(), "x");
  EXPECT_EQ(d1.find("frames")->kind, Kind::List);

  // {'k1': s, 'k2': 1.5, 'k3': s} with s = 'new string': the float is not a flat value, so the
  // fast path gives up after memoizing the dict, 'k1', s and 'k2'. Those slots must be undone, or
  // the checked path would store s again at a later index and BINGET 2 ('k3') would miss it.
  const std::string gives_up = from_hex(
      "8004952c000000000000007d94288c026b31948c0a6e657720737472696e67948c026b3294473ff8000000"
      "0000008c026b33946802752e");
  PickleDocument doc2(gives_up, "giveup.pickle");
  ASSERT_EQ(doc2.root().dict_size(), 3u);
  EXPECT_EQ(doc2.root().find("k1")->str(), "new string");
  EXPECT_EQ(doc2.root().find("k2")->real, 1.5);
  EXPECT_EQ(doc2.root().find("k3")->str(), "new string");

  // [x, x] with x = {'j': 2, 'k': 1.5}: after giving up on x, the memo slot of x must hold the
  // dict the checked path builds (BINGET 1 is the second item), not the fast path's.
  const std::string shared =
      from_hex("8004951e000000000000005d94287d94288c016a944b028c016b94473ff8000000000000756801652e");
  PickleDocument doc3(shared, "shared.pickle");
  ASSERT_EQ(doc3.root().items().size(), 2u);
  EXPECT_EQ(doc3.root().items()[1].kind, Kind::Dict);
  EXPECT_EQ(doc3.root().items()[1].dict, doc3.root().items()[0].dict);
  EXPECT_EQ(doc3.root().items()[0].dict_size(), 2u);
}

TEST(PickleFastPaths, ARunOfFlatDictsWithOneThatIsNot) {
  // [d1, d2, d3, s] where d2 = {'a': 1.5, 'b': s} with s = 'new' is not flat (a float): flat dicts
  // in a row are taken in one go, d2 is left to the checked path with its memo slots undone, and
  // d3 after it is taken again. Memo: 0 list, 1 d1, 2 'a', 3 d2, 4 'b', 5 s, 6 d3; the last item
  // is BINGET 5. 32 bytes after STOP keep every dict clear of the input's end.
  const std::string bytes = B("\x80\x04]\x94(") +
                            B("}\x94(\x8c\x01"
                              "a\x94K\x01u") +
                            B("}\x94(h\x02G?\xf8\x00\x00\x00\x00\x00\x00\x8c\x01"
                              "b\x94\x8c\x03new\x94u") +
                            B("}\x94(h\x02K\x03u") +
                            B("h\x05"
                              "e.") +
                            std::string(32, '.');
  PickleDocument doc(bytes, "run.pickle");
  const auto items = doc.root().items();
  ASSERT_EQ(items.size(), 4u);
  EXPECT_EQ(items[0].find("a")->integer, 1);
  EXPECT_EQ(items[1].find("a")->real, 1.5);
  EXPECT_EQ(items[1].find("b")->str(), "new");
  EXPECT_EQ(items[2].find("a")->integer, 3);
  EXPECT_EQ(items[3].str(), "new");
}

TEST(PickleFastPaths, Long1AtTheEndOfTheInputAndNegatives) {
  // LONG1 whose 8-byte load would cross the end of the buffer takes the careful path.
  struct Case {
    std::string bytes;
    std::int64_t value;
  };
  const Case cases[] = {
      {B("\x80\x02\x8a\x06\x00\x00\x00\x00\x80\x7f."), 0x7f8000000000LL},
      {B("\x80\x02\x8a\x02\x00\xff."), -256},
      {B("\x80\x02\x8a\x01\x80."), -128},
      {B("\x80\x02\x8a\x08\xff\xff\xff\xff\xff\xff\xff\xff."), -1},
      {B("\x80\x02\x8a\x02\x00\xff]\x94(e0."), -256},  // with 8 readable bytes
  };
  for (const Case& c : cases) {
    std::unique_ptr<char[]> buf(new char[c.bytes.size()]);
    std::memcpy(buf.get(), c.bytes.data(), c.bytes.size());
    PickleDocument doc(std::string_view(buf.get(), c.bytes.size()), "l.pickle");
    EXPECT_EQ(doc.root().kind, Kind::Int);
    EXPECT_EQ(doc.root().integer, c.value);
  }
}

TEST(PickleFastPaths, MemoizeAfterASparsePut) {
  // PUT 3 first: Python's MEMOIZE then stores at len(memo) = 1, not at 4.
  // NONE BINPUT 3 POP, BININT1 7 MEMOIZE POP, BINGET 1 STOP -> 7
  std::string bytes =
      B("\x80\x04Nq\x03"
        "0K\x07\x94"
        "0h\x01.");
  PickleDocument doc(bytes, "m.pickle");
  EXPECT_EQ(doc.root().integer, 7);
}

TEST(PickleHostile, DeepNestingNeedsNoRecursion) {
  // 200k nested lists: EMPTY_LIST x N, then APPEND x (N-1).
  const std::size_t n = 200000;
  std::string bytes = "\x80\x02";
  bytes.append(n, ']');
  bytes.append(n - 1, 'a');
  bytes.push_back('.');
  PickleDocument doc(bytes, "deep.pickle");
  const Value* v = &doc.root();
  std::size_t depth = 1;
  while (!v->items().empty()) {
    v = &v->items()[0];
    ++depth;
  }
  EXPECT_EQ(depth, n);
}

}  // namespace
}  // namespace fraglab::pickle
