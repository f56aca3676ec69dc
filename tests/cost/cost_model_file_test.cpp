// The --cost-model file reader (README "Device time"): the format both fraglab's reader and
// `fraglab calibrate` follow, its one-line errors naming the file and the key, and a partial file
// keeping the defaults of the calls it does not name.
#include <gtest/gtest.h>

#include "fraglab/cost_model.hpp"
#include "support/input_error.hpp"

namespace fraglab {
namespace {

using testing::error_of;

std::string error_in(const std::string& text) {
  return error_of([&] { parse_cost_model(text, "costs.json"); });
}

TEST(CostModelFile, NamedCallsReplaceTheDefaultsTheRestKeepThem) {
  const CostModel m = parse_cost_model(
      R"({"fraglab_cost_model": 1, "gpu": "NVIDIA A100-SXM4-80GB", "driver": "535.104.05", "source": "calibrate",
          "calls": {"cudaMalloc": {"fixed_us": 12.5, "per_gib_us": 40, "samples": 21, "source": "median"},
                    "cuMemMap": {"per_gib_us": 3}}})",
      "costs.json");
  const CostModel d = CostModel::defaults();
  EXPECT_EQ(m.gpu, "NVIDIA A100-SXM4-80GB");
  EXPECT_EQ(m.driver, "535.104.05");
  EXPECT_EQ(m[ApiCall::CudaMalloc].fixed_us, 12.5);
  EXPECT_EQ(m[ApiCall::CudaMalloc].per_gib_us, 40.0);
  // An omitted figure of a named call is 0 (the format: "either may be omitted = 0").
  EXPECT_EQ(m[ApiCall::CuMemMap].fixed_us, 0.0);
  EXPECT_EQ(m[ApiCall::CuMemMap].per_gib_us, 3.0);
  // Every call the file does not name keeps its default.
  for (std::size_t i = 0; i < kApiCallCount; ++i) {
    const auto call = static_cast<ApiCall>(i);
    if (call == ApiCall::CudaMalloc || call == ApiCall::CuMemMap) continue;
    EXPECT_EQ(m[call].fixed_us, d[call].fixed_us) << api_call_name(call);
    EXPECT_EQ(m[call].per_gib_us, d[call].per_gib_us) << api_call_name(call);
  }
}

TEST(CostModelFile, OneCallTakesFixedPlusPerGibTimesGibibytes) {
  CostModel m;
  m[ApiCall::CudaFree] = {10, 1000};
  EXPECT_DOUBLE_EQ(m.microseconds(ApiCall::CudaFree, GiB / 2), 10 + 500);  // 10 + 1000 * 0.5
  EXPECT_DOUBLE_EQ(m.microseconds(ApiCall::CudaFree, 0), 10);
}

TEST(CostModelFile, EveryCallNameOfTheFormatIsKnown) {
  for (const char* name : {"cudaMalloc", "cudaFree", "cudaDeviceSynchronize", "cuMemAddressReserve", "cuMemAddressFree",
                           "cuMemCreate", "cuMemRelease", "cuMemMap", "cuMemUnmap", "cuMemSetAccess",
                           "cudaMallocAsync_hit", "cudaMallocAsync_miss", "cudaMemPoolTrimTo"}) {
    ASSERT_TRUE(api_call_named(name).has_value()) << name;
    EXPECT_EQ(api_call_name(*api_call_named(name)), name);
  }
}

TEST(CostModelFile, ErrorsNameTheFileAndTheKey) {
  EXPECT_EQ(error_in(R"({"calls": {}})"),
            "costs.json: key 'fraglab_cost_model': expected the key (the format version, 1)");
  EXPECT_EQ(error_in(R"({"fraglab_cost_model": 2, "calls": {}})"), "costs.json: key 'fraglab_cost_model': expected 1");
  EXPECT_EQ(error_in(R"({"fraglab_cost_model": 1.0, "calls": {}})"),
            "costs.json: key 'fraglab_cost_model': expected 1");
  EXPECT_EQ(error_in(R"({"fraglab_cost_model": 1})"), "costs.json: key 'calls': expected an object of call costs");
  EXPECT_EQ(error_in(R"({"fraglab_cost_model": 1, "calls": []})"),
            "costs.json: key 'calls': expected an object of call costs");
  EXPECT_EQ(error_in(R"({"fraglab_cost_model": 1, "calls": {"cudaMalloc": {"fixed_us": -1}}})"),
            "costs.json: key 'calls.cudaMalloc.fixed_us': expected a non-negative finite number of microseconds");
  EXPECT_EQ(error_in(R"({"fraglab_cost_model": 1, "calls": {"cudaFree": {"per_gib_us": "3"}}})"),
            "costs.json: key 'calls.cudaFree.per_gib_us': expected a non-negative finite number of microseconds");
  EXPECT_EQ(error_in(R"({"fraglab_cost_model": 1, "calls": {"cudaFree": {"fixed_us": 1e999}}})")
                .rfind("costs.json: not a cost-model JSON file", 0),
            0u);  // JSON has no infinity: an overflowing number is not valid JSON to the parser
  EXPECT_EQ(error_in(R"({"fraglab_cost_model": 1, "calls": {"cudaFree": {"fixed_us": 1, "unit": "ms"}}})"),
            "costs.json: key 'calls.cudaFree.unit': expected one of fixed_us, per_gib_us, source, samples");
  EXPECT_EQ(error_in(R"({"fraglab_cost_model": 1, "calls": {"cudaFree": {"samples": 2.5}}})"),
            "costs.json: key 'calls.cudaFree.samples': expected an integer");
  EXPECT_EQ(error_in(R"({"fraglab_cost_model": 1, "calls": {"cudaFree": 7}})"),
            "costs.json: key 'calls.cudaFree': expected an object with fixed_us and per_gib_us");
  EXPECT_EQ(error_in(R"({"fraglab_cost_model": 1, "gpu": 80, "calls": {}})"),
            "costs.json: key 'gpu': expected a string");
  EXPECT_EQ(error_in(R"({"fraglab_cost_model": 1, "calls": {}, "extra": 1})"),
            "costs.json: key 'extra': expected one of fraglab_cost_model, gpu, driver, source, calls");
  const std::string unknown = error_in(R"({"fraglab_cost_model": 1, "calls": {"cudaMallocManaged": {}}})");
  EXPECT_EQ(unknown.rfind("costs.json: key 'calls.cudaMallocManaged': expected a call name: cudaMalloc, cudaFree,", 0),
            0u)
      << unknown;
  EXPECT_EQ(error_in("{not json").rfind("costs.json: not a cost-model JSON file (", 0), 0u);
  EXPECT_EQ(error_in("[1]"),
            "costs.json: key 'fraglab_cost_model': expected a JSON object with the key fraglab_cost_model");
  EXPECT_EQ(error_of([] { read_cost_model("/nonexistent/costs.json"); }),
            "/nonexistent/costs.json: cannot open the cost-model file");
}

TEST(CostModelFile, EveryMessageIsOneLine) {
  for (const std::string& text : {std::string("{\n\"fraglab_cost_model\": 1,\n oops}"),
                                  std::string(R"({"fraglab_cost_model": 1, "calls": {"x": {}}})")}) {
    EXPECT_EQ(error_in(text).find('\n'), std::string::npos) << error_in(text);
  }
}

}  // namespace
}  // namespace fraglab
