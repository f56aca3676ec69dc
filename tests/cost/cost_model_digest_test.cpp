// cost_model_digest (fraglab/cost_model.hpp): what a sweep's results file records of its cost
// model. The figures make it; the descriptions (gpu, driver, source) do not.
#include <gtest/gtest.h>

#include "fraglab/cost_model.hpp"

namespace fraglab {
namespace {

TEST(CostModelDigest, FiguresCountDescriptionsDoNot) {
  const CostModel defaults = CostModel::defaults();
  const std::string digest = cost_model_digest(defaults);
  ASSERT_EQ(digest.size(), 24u);  // "fnv1a64:" and 16 hex digits, as trace request hashes
  EXPECT_EQ(digest.rfind("fnv1a64:", 0), 0u);
  CostModel described = defaults;
  described.gpu = "another GPU";
  described.driver = "another driver";
  described.source = "another file";
  EXPECT_EQ(cost_model_digest(described), digest);
  // Any one figure of any call changes it.
  for (std::size_t i = 0; i < kApiCallCount; ++i) {
    CostModel fixed = defaults, per_gib = defaults;
    fixed[static_cast<ApiCall>(i)].fixed_us += 0.5;
    per_gib[static_cast<ApiCall>(i)].per_gib_us += 0.5;
    EXPECT_NE(cost_model_digest(fixed), digest) << api_call_name(static_cast<ApiCall>(i));
    EXPECT_NE(cost_model_digest(per_gib), digest) << api_call_name(static_cast<ApiCall>(i));
    EXPECT_NE(cost_model_digest(fixed), cost_model_digest(per_gib)) << api_call_name(static_cast<ApiCall>(i));
  }
  // The same figures read from a file are the same model.
  EXPECT_EQ(cost_model_digest(parse_cost_model(R"({"fraglab_cost_model": 1, "source": "x", "calls": {}})", "x.json")),
            digest);
}

}  // namespace
}  // namespace fraglab
