// The trace identity check records and compares (trace_identity.hpp): the request hash computed
// here independently from its written specification over the JSONL text, its independence of
// storage (snapshot vs converted JSONL) and of arbitrary ids, and `fraglab check` failing when
// the trace is not the baseline's (--allow-trace-change, baselines without an identity).
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <nlohmann/json.hpp>
#include <sstream>

#include "fraglab/trace_identity.hpp"
#include "support/command.hpp"
#include "support/real_traces.hpp"

namespace fraglab {
namespace {

namespace fs = std::filesystem;
using testing::read_text;
using testing::run_fraglab;

const std::string kSamples = std::string(FRAGLAB_SOURCE_DIR) + "/traces/samples/";
const std::string kBaselines = std::string(FRAGLAB_SOURCE_DIR) + "/traces/baselines/";

// FNV-1a 64 as its authors define it (offset basis 14695981039346656037, prime 1099511628211).
struct Fnv {
  std::uint64_t h = 14695981039346656037ull;
  void byte(unsigned char b) {
    h ^= b;
    h *= 1099511628211ull;
  }
  void u64(std::uint64_t v) {
    for (int i = 0; i < 8; ++i) byte(static_cast<unsigned char>((v >> (8 * i)) & 0xff));
  }
  void text(const std::string& s) {
    for (char c : s) byte(static_cast<unsigned char>(c));
  }
  std::string hex() const {
    std::ostringstream out;
    out << "fnv1a64:" << std::hex;
    out.width(16);
    out.fill('0');
    out << h;
    return out.str();
  }
};

TEST(RequestHash, FnvMatchesThePublishedTestVectors) {
  // The reference vectors of FNV-1a 64 (Fowler/Noll/Vo): "" and "a". Checks the helper below.
  Fnv empty;
  EXPECT_EQ(empty.hex(), "fnv1a64:cbf29ce484222325");
  Fnv a;
  a.text("a");
  EXPECT_EQ(a.hex(), "fnv1a64:af63dc4c8601ec8c");
}

// The hash of a native JSONL trace, following trace_identity.hpp's specification.
std::string spec_hash(const std::string& jsonl) {
  std::istringstream in(jsonl);
  std::string line;
  std::getline(in, line);
  const auto header = nlohmann::json::parse(line);
  Fnv h;
  h.text("fraglab-requests-v1");
  std::map<std::uint64_t, std::uint64_t> ordinal;
  std::uint64_t next = 0;
  std::vector<nlohmann::json> initial;
  if (header.contains("initial_allocations")) {
    for (const auto& a : header["initial_allocations"]) initial.push_back(a);
  }
  std::stable_sort(initial.begin(), initial.end(), [](const auto& x, const auto& y) {
    return x["addr"].template get<std::uint64_t>() < y["addr"].template get<std::uint64_t>();
  });
  for (const auto& a : initial) {
    h.byte('I');
    h.u64(a["size"].get<std::uint64_t>());
    h.u64(a.value("stream", std::uint64_t{0}));
    h.u64(a.value("free_requested", false) ? 1 : 0);
    ordinal[a["id"].get<std::uint64_t>()] = next++;
  }
  auto freed = [&](const nlohmann::json& e, bool release) {
    const auto it = ordinal.find(e["id"].get<std::uint64_t>());
    if (it == ordinal.end()) return ~std::uint64_t{0};
    const std::uint64_t n = it->second;
    if (release) ordinal.erase(it);
    return n;
  };
  while (std::getline(in, line)) {
    if (line.empty()) continue;
    const auto e = nlohmann::json::parse(line);
    const std::string op = e["op"];
    if (op == "alloc") {
      h.byte('A');
      h.u64(e["size"].get<std::uint64_t>());
      h.u64(e.value("stream", std::uint64_t{0}));
      ordinal[e["id"].get<std::uint64_t>()] = next++;
    } else if (op == "free") {
      h.byte('F');
      h.u64(freed(e, true));
    } else if (op == "free_requested") {
      h.byte('R');
      h.u64(freed(e, false));
    } else if (op == "free_completed") {
      h.byte('C');
      h.u64(freed(e, true));
    } else if (op == "empty_cache") {
      h.byte('E');
    }
  }
  return h.hex();
}

nlohmann::json replay_json(const std::string& trace) {
  const auto run = run_fraglab("replay " + trace + " -p nocache --json -");
  EXPECT_EQ(run.status, 0) << run.err;
  return nlohmann::json::parse(run.out);
}

TEST(RequestHash, SamplesHashAsTheSpecificationSays) {
  // Every shipped sample: deferred frees (streams), initial allocations and observed events
  // (cutoff), an empty_cache (two-phase).
  for (const char* name : {"two-phase", "streams", "cutoff", "concat-before", "concat-after"}) {
    const std::string path = kSamples + name + ".jsonl";
    const auto trace = replay_json(path)["trace"];
    EXPECT_EQ(trace["request_hash"], spec_hash(read_text(path))) << name;
    EXPECT_EQ(trace["name"], name);
  }
}

TEST(RequestHash, IdsAddressesTimesAndObservedEventsDoNotCountSizesAndPairingDo) {
  const fs::path dir = testing::scratch_dir("identity");
  const std::string head = "{\"fraglab_trace\":1,\"name\":\"t\",\"source\":\"test\"}\n";
  auto hash_of = [&](const std::string& name, const std::string& body) {
    const fs::path path = dir / (name + ".jsonl");
    testing::write_text(path, head + body);
    return replay_json(path.string())["trace"]["request_hash"].get<std::string>();
  };
  const std::string base = hash_of("base",
                                   "{\"op\":\"alloc\",\"id\":1,\"size\":1024}\n"
                                   "{\"op\":\"alloc\",\"id\":2,\"size\":2048}\n"
                                   "{\"op\":\"free\",\"id\":1}\n{\"op\":\"free\",\"id\":2}\n");
  // Other ids, addresses, times, a mark and a segment event: the same requests.
  EXPECT_EQ(hash_of("renamed",
                    "{\"op\":\"mark\",\"label\":\"step\",\"value\":1}\n"
                    "{\"op\":\"alloc\",\"id\":70,\"size\":1024,\"addr\":4096,\"t\":5}\n"
                    "{\"op\":\"segment_alloc\",\"addr\":4096,\"size\":2097152,\"stream\":0}\n"
                    "{\"op\":\"alloc\",\"id\":9,\"size\":2048,\"t\":6}\n"
                    "{\"op\":\"free\",\"id\":70}\n{\"op\":\"free\",\"id\":9}\n"),
            base);
  // A size, a stream, or which allocation is freed first: different requests.
  EXPECT_NE(hash_of("size",
                    "{\"op\":\"alloc\",\"id\":1,\"size\":1025}\n{\"op\":\"alloc\",\"id\":2,\"size\":2048}\n"
                    "{\"op\":\"free\",\"id\":1}\n{\"op\":\"free\",\"id\":2}\n"),
            base);
  EXPECT_NE(
      hash_of("stream",
              "{\"op\":\"alloc\",\"id\":1,\"size\":1024,\"stream\":7}\n{\"op\":\"alloc\",\"id\":2,\"size\":2048}\n"
              "{\"op\":\"free\",\"id\":1}\n{\"op\":\"free\",\"id\":2}\n"),
      base);
  EXPECT_NE(hash_of("order",
                    "{\"op\":\"alloc\",\"id\":1,\"size\":1024}\n{\"op\":\"alloc\",\"id\":2,\"size\":2048}\n"
                    "{\"op\":\"free\",\"id\":2}\n{\"op\":\"free\",\"id\":1}\n"),
            base);
}

TEST(RequestHash, SnapshotAndItsConvertedJsonlAreTheSameTrace) {
  const fs::path real = FRAGLAB_REAL_TRACES;
  FRAGLAB_NEEDS_REAL_TRACE(real);
  const fs::path dir = testing::scratch_dir("identity");
  // A snapshot with a cut-off start (initial allocations) and one that starts empty.
  for (const char* name : {"lm2.7b-ctx128-fullstep", "tiny-segments"}) {
    const std::string snapshot = (real / (std::string(name) + ".pickle")).string();
    const std::string converted = (dir / (std::string(name) + ".jsonl")).string();
    ASSERT_EQ(run_fraglab("convert " + snapshot + " -o " + converted).status, 0);
    const auto a = replay_json(snapshot)["trace"];
    const auto b = replay_json(converted)["trace"];
    EXPECT_EQ(a["request_hash"], b["request_hash"]) << name;
    EXPECT_EQ(a["events"], b["events"]) << name;
    EXPECT_EQ(a["request_hash"], spec_hash(read_text(converted))) << name;
    // So a baseline recorded from the snapshot gates the JSONL without a trace problem.
    const std::string baseline = (dir / (std::string(name) + ".json")).string();
    fs::remove(baseline);
    ASSERT_EQ(run_fraglab("check " + snapshot + " -b " + baseline + " -p pytorch --update-baseline").status, 0);
    const auto check = run_fraglab("check " + converted + " -b " + baseline);
    EXPECT_EQ(check.status, 0) << check.out << check.err;
    EXPECT_EQ(check.out.find("note:"), std::string::npos) << check.out;
    EXPECT_EQ(check.out.find("error:"), std::string::npos) << check.out;
  }
}

// ---- check against a baseline of another trace -----------------------------------------------

// "NAME (N events, requests HASH)", built from a results JSON.
std::string identity_text(const nlohmann::json& results) {
  const auto& t = results["trace"];
  return t["name"].get<std::string>() + " (" + std::to_string(t["events"].get<std::uint64_t>()) + " events, requests " +
         t["request_hash"].get<std::string>() + ")";
}

TEST(CheckTraceIdentity, AnotherTraceFailsNamingBothUnlessAllowed) {
  // concat-after is the same step as concat-before with less memory: without the identity the
  // check would pass (every figure improves).
  const std::string baseline = kBaselines + "concat-before.json";
  const std::string trace = kSamples + "concat-after.jsonl";
  const auto run = run_fraglab("check " + trace + " --baseline " + baseline);
  EXPECT_EQ(run.status, 1) << run.out << run.err;
  const std::string expected = "the trace changed: baseline " +
                               identity_text(nlohmann::json::parse(read_text(baseline))) + ", now " +
                               identity_text(replay_json(trace));
  EXPECT_NE(run.out.find(expected), std::string::npos) << run.out;
  EXPECT_NE(run.out.find("--allow-trace-change"), std::string::npos) << run.out;
  EXPECT_NE(run.out.find("--update-baseline"), std::string::npos) << run.out;

  const auto allowed = run_fraglab("check " + trace + " --baseline " + baseline + " --allow-trace-change");
  EXPECT_EQ(allowed.status, 0) << allowed.out << allowed.err;
  EXPECT_NE(allowed.out.find("note: " + expected + " (allowed by --allow-trace-change)"), std::string::npos)
      << allowed.out;
}

TEST(CheckTraceIdentity, RealSnapshotAgainstABaselineOfAnotherModel) {
  // The case: a fine-tuning step checked against a baseline of the 2.7B LM.
  const fs::path real = FRAGLAB_REAL_TRACES;
  FRAGLAB_NEEDS_REAL_TRACE(real);
  const fs::path dir = testing::scratch_dir("identity");
  const std::string baseline = (dir / "lm2.7b.json").string();
  fs::remove(baseline);
  const std::string lm = (real / "lm2.7b-ctx128-fullstep.pickle").string();
  const std::string finetune = (real / "finetune-step-oldformat.pickle").string();
  ASSERT_EQ(run_fraglab("check " + lm + " -b " + baseline + " -p pytorch --update-baseline").status, 0);
  const auto run = run_fraglab("check " + finetune + " -b " + baseline);
  EXPECT_EQ(run.status, 1) << run.out << run.err;
  EXPECT_NE(
      run.out.find("baseline " + identity_text(replay_json(lm)) + ", now " + identity_text(replay_json(finetune))),
      std::string::npos)
      << run.out;
  EXPECT_EQ(run_fraglab("check " + finetune + " -b " + baseline + " --allow-trace-change").status, 0);
}

TEST(CheckTraceIdentity, BaselineWithoutIdentityWarnsAndGoesOn) {
  const fs::path dir = testing::scratch_dir("identity");
  auto old = nlohmann::json::parse(read_text(kBaselines + "two-phase.json"));
  old["trace"].erase("request_hash");  // as recorded before fraglab kept an identity
  const fs::path baseline = dir / "old-baseline.json";
  testing::write_text(baseline, old.dump(2));
  const auto run = run_fraglab("check " + kSamples + "two-phase.jsonl --baseline " + baseline.string());
  EXPECT_EQ(run.status, 0) << run.out << run.err;
  EXPECT_NE(run.err.find("warning: the baseline has no trace identity"), std::string::npos) << run.err;
  EXPECT_NE(run.err.find("--update-baseline"), std::string::npos) << run.err;
  // Refreshing it records the identity, and the warning is gone.
  ASSERT_EQ(run_fraglab("check " + kSamples + "two-phase.jsonl --baseline " + baseline.string() + " --update-baseline")
                .status,
            0);
  EXPECT_EQ(nlohmann::json::parse(read_text(baseline))["trace"]["request_hash"],
            spec_hash(read_text(kSamples + "two-phase.jsonl")));
  const auto again = run_fraglab("check " + kSamples + "two-phase.jsonl --baseline " + baseline.string());
  EXPECT_EQ(again.status, 0);
  EXPECT_EQ(again.err, "");
}

}  // namespace
}  // namespace fraglab
