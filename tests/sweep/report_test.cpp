// The end-of-sweep summary on hand-made rows: ranking, the Pareto front, the best setting and its
// PYTORCH_CUDA_ALLOC_CONF line, and the progress text.
#include <gtest/gtest.h>

#include "fraglab/sweep.hpp"
#include "fraglab/sweep_report.hpp"
#include "fraglab/types.hpp"

namespace fraglab {
namespace {

SweepRow point(const std::string& name, Bytes reserved_mib, std::uint64_t retries, std::uint64_t calls,
               std::uint64_t ooms = 0, double device_ms = 0) {
  SweepRow r;
  r.trace = "t";
  r.device = "sim";
  r.spec = "pytorch:max_split_size_mb:" + name;
  r.knobs = {name};
  r.metrics.peak_reserved = reserved_mib * MiB;
  r.metrics.num_alloc_retries = retries;
  r.metrics.num_device_alloc = calls;  // all calls as allocs: device_calls() = calls
  r.metrics.num_ooms = ooms;
  r.metrics.device_time_s = device_ms / 1000;
  r.metrics.stall_time_s = device_ms / 2000;
  return r;
}

std::vector<std::string> names(const std::vector<SweepRow>& rows) {
  std::vector<std::string> out;
  out.reserve(rows.size());
  for (const SweepRow& r : rows) out.push_back(*r.knobs[0]);
  return out;
}

// (peak reserved MiB, retries, device calls, device time ms):
//   E (90,1,50,50) B (100,0,20,20) A (100,5,10,10) F (100,5,10,10) C (120,0,5,5) D (130,0,30,30)
//   G (80,0,0,0, OOM)
// The Pareto front is over peak reserved and device time. By hand: E has the least peak but costs
// the most time, and stays; B is dominated by A (same peak, less time); D by A (less peak, less
// time); G ran out of memory; A and F tie exactly and both stay; C has the least time.
const std::vector<SweepRow> kRows = {point("A", 100, 5, 10, 0, 10), point("B", 100, 0, 20, 0, 20),
                                     point("C", 120, 0, 5, 0, 5),   point("D", 130, 0, 30, 0, 30),
                                     point("E", 90, 1, 50, 0, 50),  point("F", 100, 5, 10, 0, 10),
                                     point("G", 80, 0, 0, 1)};

TEST(Report, RankByPeakThenRetriesThenCallsOomsLast) {
  EXPECT_EQ(names(rank_rows(kRows)), (std::vector<std::string>{"E", "B", "A", "F", "C", "D", "G"}));
}

TEST(Report, ParetoFrontByHand) {
  EXPECT_EQ(names(pareto_front(kRows)), (std::vector<std::string>{"E", "A", "F", "C"}));
}

TEST(Report, ParetoFrontKeepsALowerPeakThatCostsMoreTime) {
  // L needs less memory but more device time than M; H is worse than M on both.
  const std::vector<SweepRow> rows = {point("L", 80, 0, 9, 0, 40), point("M", 100, 0, 9, 0, 4),
                                      point("H", 110, 0, 1, 0, 5)};
  EXPECT_EQ(names(pareto_front(rows)), (std::vector<std::string>{"L", "M"}));
  // Fewer device calls do not save H: the front weighs time, not calls.
  const std::string text = sweep_report(ResultsTable{{"max_split_size_mb"}, rows});
  EXPECT_NE(text.find("Pareto front (lower peak reserved vs less device time"), std::string::npos) << text;
  EXPECT_NE(text.find("0.040000 s device    0.020000 s stall"), std::string::npos) << text;
  // The recommendation (least peak) states its device and stall time.
  EXPECT_NE(text.find("best: pytorch:max_split_size_mb:L\n"), std::string::npos) << text;
  EXPECT_NE(text.find("  device time 0.040000 s, of which stall 0.020000 s"), std::string::npos) << text;
}

TEST(Report, AllocConfLineIsReadyToPaste) {
  EXPECT_EQ(alloc_conf_line("pytorch:expandable_segments:True,max_split_size_mb:128"),
            "PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True,max_split_size_mb:128");
  // fraglab's `version` is not a PyTorch key.
  EXPECT_EQ(alloc_conf_line("pytorch:version:2.4,garbage_collection_threshold:0.8"),
            "PYTORCH_CUDA_ALLOC_CONF=garbage_collection_threshold:0.8");
  // '[' and '>' mean something to a shell: quoted.
  EXPECT_EQ(alloc_conf_line("pytorch:roundup_power2_divisions:[256:1,512:2,>:8]"),
            "PYTORCH_CUDA_ALLOC_CONF='roundup_power2_divisions:[256:1,512:2,>:8]'");
  EXPECT_EQ(alloc_conf_line("pytorch"), "PYTORCH_CUDA_ALLOC_CONF=");
  EXPECT_EQ(alloc_conf_line("nocache"), std::nullopt);
}

TEST(Report, SummaryNamesTheBestAndComparesWithTheDefaults) {
  SweepRow defaults = point("none", 110, 0, 40);
  defaults.knobs = {std::nullopt};
  defaults.spec = "pytorch";
  std::vector<SweepRow> rows = kRows;
  rows.push_back(defaults);
  const std::string text = sweep_report(ResultsTable{{"max_split_size_mb"}, rows});
  // E wins: 90 MiB is 20 MiB (-18.2%) under the defaults' 110 MiB.
  EXPECT_NE(text.find("best: pytorch:max_split_size_mb:E\n"), std::string::npos) << text;
  EXPECT_NE(text.find("-20.00 MiB / -18.2% vs the defaults' 110.00 MiB"), std::string::npos) << text;
  EXPECT_NE(text.find("PYTORCH_CUDA_ALLOC_CONF=max_split_size_mb:E\n"), std::string::npos) << text;
  EXPECT_NE(text.find("(+1 more with the same figures)"), std::string::npos) << "A and F share a line: " << text;
  // Rows are shown ranked; G (OOM) last.
  EXPECT_LT(text.find("  E  "), text.find("  B  "));
  EXPECT_LT(text.find("  C  "), text.find("  G  "));
  SweepReportOptions top2;
  top2.top = 2;
  EXPECT_NE(sweep_report(ResultsTable{{"max_split_size_mb"}, rows}, top2).find("... 6 more (showing 2 of 8"),
            std::string::npos);
}

TEST(Report, SeveralTracesGetABestAcrossThem) {
  std::vector<SweepRow> rows;
  for (const char* trace : {"t1", "t2"}) {
    for (SweepRow r : {point("64", 100, 0, 1), point("128", 90, 0, 1)}) {
      r.trace = trace;
      if (std::string(trace) == "t2" && r.knobs[0] == "128") r.metrics.peak_reserved = 200 * MiB;
      rows.push_back(r);
    }
  }
  // Sums: 64 -> 200 MiB, 128 -> 290 MiB.
  const std::string text = sweep_report(ResultsTable{{"max_split_size_mb"}, rows});
  EXPECT_NE(text.find("== across 2 traces ==\nbest: pytorch:max_split_size_mb:64\n"), std::string::npos) << text;
}

TEST(Report, ProgressTerminalBarAndPlainLines) {
  EXPECT_EQ(format_progress(50, 200, 10.0, false), "sweep: 50/200  25% 5.0 runs/s elapsed 0:10 ETA 0:30");
  EXPECT_EQ(format_progress(50, 200, 10.0, true),
            "[#######.......................] 50/200  25% 5.0 runs/s elapsed 0:10 ETA 0:30");
  EXPECT_EQ(format_progress(0, 10, 0.0, false), "sweep: 0/10   0% 0.0 runs/s elapsed 0:00 ETA ?");
  EXPECT_EQ(format_duration(3723), "1:02:03");
}

}  // namespace
}  // namespace fraglab
