// `--device cuda` and `fraglab calibrate` end to end, on the fake CUDA driver (fake/): a replay on
// the GPU gives the results a simulated device of the same memory gives, leaves nothing held in
// the driver, and the errors are one line with exit status 2.
#include <gtest/gtest.h>

#include <chrono>
#include <cmath>
#include <nlohmann/json.hpp>

#include "cuda/fake_driver_env.hpp"
#include "fraglab/types.hpp"
#include "support/real_traces.hpp"

namespace fraglab::testing {
namespace {

const fs::path kSamples = fs::path(FRAGLAB_SOURCE_DIR) / "traces" / "samples";
const fs::path kReal = FRAGLAB_REAL_TRACES;

void expect_clean_ledger(const fs::path& ledger) {
  const auto l = read_ledger(ledger);
  ASSERT_FALSE(l.empty()) << "no ledger written at " << ledger;
  for (const char* key :
       {"used_bytes", "live_allocs", "live_reservations", "live_handles", "live_mappings", "context_refs", "invalid"}) {
    EXPECT_EQ(l.at(key), 0u) << key;
  }
}

// `replay TRACE -p SPEC --json -` on cuda:0 (the fake, `memory` bytes) and on sim of that memory:
// the same JSON but for the "device" object, which names the device, and the measured time in driver
// calls, which only cuda has.
void expect_same_as_sim(const fs::path& trace, const std::string& spec, std::uint64_t memory = 80 * GiB) {
  SCOPED_TRACE(trace.filename().string() + " " + spec);
  const fs::path ledger = scratch_dir("cuda") / "ledger.txt";
  fs::remove(ledger);
  const std::string args = trace.string() + " -p '" + spec + "' --json -";
  const CommandResult cuda = run_with_env(fake_env(ledger, "FRAGLAB_FAKE_CUDA_TOTAL=" + std::to_string(memory)),
                                          "replay " + args + " --device cuda:0");
  const CommandResult sim = run_fraglab("replay " + args + " --device sim:" + std::to_string(memory) + "B");
  ASSERT_EQ(cuda.status, 0) << cuda.err;
  ASSERT_EQ(sim.status, 0) << sim.err;
  nlohmann::json on_cuda = nlohmann::json::parse(cuda.out);
  nlohmann::json on_sim = nlohmann::json::parse(sim.out);
  EXPECT_EQ(on_cuda["device"]["kind"], "cuda:0");
  EXPECT_EQ(on_cuda["device"]["capacity_bytes"], on_sim["device"]["capacity_bytes"]);
  on_cuda.erase("device");
  on_sim.erase("device");
  // The time measured inside the driver's calls is on cuda only (and not deterministic).
  for (auto& run : on_cuda["runs"]) {
    EXPECT_TRUE(run.contains("measured_device_time_s"));
    run.erase("measured_device_time_s");
  }
  for (const auto& run : on_sim["runs"]) EXPECT_FALSE(run.contains("measured_device_time_s"));
  EXPECT_EQ(on_cuda, on_sim);
  expect_clean_ledger(ledger);
  // The driver's own count of the memory it held at most is the peak reserved bytes reported.
  EXPECT_EQ(read_ledger(ledger).at("peak_used_bytes"), on_sim["runs"][0]["peak_reserved_bytes"].get<std::uint64_t>());
}

const char* const kSpecs[] = {"pytorch", "pytorch:expandable_segments:True", "gmlake"};

TEST(CudaDevice, ShippedSamplesGiveTheSimResults) {
  for (const auto& entry : fs::directory_iterator(kSamples)) {
    if (entry.path().extension() != ".jsonl") continue;
    for (const char* spec : kSpecs) expect_same_as_sim(entry.path(), spec);
  }
}

TEST(CudaDevice, RealSnapshotsGiveTheSimResults) {
  FRAGLAB_NEEDS_REAL_TRACE(kReal);
  for (const auto& entry : fs::directory_iterator(kReal)) {
    if (entry.path().extension() != ".pickle") continue;
    for (const char* spec : kSpecs) expect_same_as_sim(entry.path(), spec);
  }
}

TEST(CudaDevice, GmlakeStitchesThroughRetainedHandles) {
  // No shipped trace makes gmlake stitch; a generated T5-3B ZeRO-3 step on 32 GiB does (its peak
  // requested is 28.67 GiB): stitched blocks map retained handles of mapped pages again.
  const fs::path trace = scratch_dir("cuda") / "t5.jsonl";
  const CommandResult gen =
      run_fraglab("gen --model t5-3b --framework zero3 --micro-batch 8 --steps 2 --overwrite -o " + trace.string());
  ASSERT_EQ(gen.status, 0) << gen.err;
  expect_same_as_sim(trace, "gmlake", 32 * GiB);
  const auto ledger = read_ledger(scratch_dir("cuda") / "ledger.txt");
  EXPECT_GT(ledger.at("retains"), 0u);
}

TEST(CudaDevice, OutOfMemoryIsThePolicysOutOfMemory) {
  // two-phase.jsonl requests 233 MiB at its peak (README's worked example); on 240 MiB pytorch must flush and then fail
  // some requests: the same flushes and OOMs as on sim:240MiB.
  const fs::path trace = kSamples / "two-phase.jsonl";
  for (const char* spec : kSpecs) expect_same_as_sim(trace, spec, 240 * MiB);
  const CommandResult sim = run_fraglab("replay " + trace.string() + " -p pytorch --json - --device sim:240MiB");
  EXPECT_GT(nlohmann::json::parse(sim.out)["runs"][0]["num_alloc_retries"].get<int>(), 0) << sim.out;
}

TEST(CudaDevice, MeasuresTheTimeSpentInDriverCalls) {
  // Every call of the fake driver sleeps 2 ms: each device call of the results (a cuMemAlloc, a
  // cuMemFree, per page a cuMemCreate + cuMemMap + cuMemSetAccess or a cuMemUnmap + cuMemRelease)
  // is at least one driver call, so the measured time is at least calls x 2 ms; it cannot exceed the
  // command's whole wall time.
  constexpr double kDelay = 0.002;
  const fs::path ledger = scratch_dir("cuda") / "measured.txt";
  for (const char* spec : {"nocache", "pytorch:expandable_segments:True"}) {
    SCOPED_TRACE(spec);
    const auto started = std::chrono::steady_clock::now();
    const CommandResult r =
        run_with_env(fake_env(ledger, "FRAGLAB_FAKE_CUDA_CALL_DELAY_US=2000"),
                     "replay " + (kSamples / "two-phase.jsonl").string() + " -p " + spec + " --device cuda:0 --json -");
    const double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
    ASSERT_EQ(r.status, 0) << r.err;
    const nlohmann::json run = nlohmann::json::parse(r.out).at("runs").at(0);
    const auto calls = run.at("num_device_alloc").get<std::uint64_t>() + run.at("num_device_free").get<std::uint64_t>();
    ASSERT_GT(calls, 0u);
    const double measured = run.at("measured_device_time_s").get<double>();
    EXPECT_GE(measured, static_cast<double>(calls) * kDelay) << calls << " calls";
    EXPECT_LT(measured, wall);
    // The table shows it next to the estimate.
    const CommandResult table = run_with_env(
        fake_env(ledger), "replay " + (kSamples / "two-phase.jsonl").string() + " -p " + spec + " --device cuda:0");
    ASSERT_EQ(table.status, 0) << table.err;
    EXPECT_NE(table.out.find("stall_s  measured_s\n"), std::string::npos) << table.out;
    // So does compare's, after its stall_s column.
    const CommandResult compared = run_with_env(
        fake_env(ledger), "compare " + (kSamples / "two-phase.jsonl").string() + " -p " + spec + " --device cuda:0");
    ASSERT_EQ(compared.status, 0) << compared.err;
    EXPECT_NE(compared.out.find("stall_s  measured_s\n"), std::string::npos) << compared.out;
  }
  // On sim there is nothing to measure: no key, no column.
  const CommandResult sim =
      run_fraglab("replay " + (kSamples / "two-phase.jsonl").string() + " -p nocache --device sim:80GiB");
  EXPECT_EQ(sim.out.find("measured_s"), std::string::npos) << sim.out;
  const CommandResult sim_compare =
      run_fraglab("compare " + (kSamples / "two-phase.jsonl").string() + " -p nocache --device sim:80GiB");
  EXPECT_EQ(sim_compare.out.find("measured_s"), std::string::npos) << sim_compare.out;
}

TEST(CudaDevice, RefusesATraceWhosePeakCannotFit) {
  const fs::path ledger = scratch_dir("cuda") / "refuse.txt";
  const CommandResult r = run_with_env(fake_env(ledger, "FRAGLAB_FAKE_CUDA_TOTAL=" + std::to_string(100 * MiB)),
                                       "replay " + (kSamples / "two-phase.jsonl").string() + " --device cuda:0");
  EXPECT_EQ(r.status, 2);
  // 244323328 B: the most bytes live at once, summed from the file's alloc/free lines by hand (python).
  EXPECT_NE(r.err.find("two-phase: the trace needs 233.00 MiB (244323328 B) at its peak, the device cuda:0 has "
                       "100.00 MiB (104857600 B) free"),
            std::string::npos)
      << r.err;
}

TEST(CudaDevice, NoDriverNoDeviceBadOrdinalExitTwo) {
  const fs::path ledger = scratch_dir("cuda") / "errors.txt";
  const std::string trace = (kSamples / "two-phase.jsonl").string();
  const CommandResult missing =
      run_with_env("env FRAGLAB_CUDA_DRIVER=/nonexistent/libcuda.so.1 ", "replay " + trace + " --device cuda");
  EXPECT_EQ(missing.status, 2);
  EXPECT_NE(missing.err.find("--device 'cuda': no CUDA driver"), std::string::npos) << missing.err;
  const CommandResult no_gpu =
      run_with_env(fake_env(ledger, "FRAGLAB_FAKE_CUDA_NO_GPU=1"), "replay " + trace + " --device cuda:0");
  EXPECT_EQ(no_gpu.status, 2);
  EXPECT_NE(no_gpu.err.find("--device 'cuda:0': no CUDA device (cuInit failed"), std::string::npos) << no_gpu.err;
  const CommandResult ordinal = run_with_env(fake_env(ledger), "replay " + trace + " --device cuda:2");
  EXPECT_EQ(ordinal.status, 2);
  EXPECT_NE(ordinal.err.find("no CUDA device 2"), std::string::npos) << ordinal.err;
}

TEST(CudaDevice, WithoutAnInstalledDriverSaysSo) {
  // The machine's own libcuda.so.1, without the variable: only where none is installed.
  void* installed = ::dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
  if (installed != nullptr) {
    ::dlclose(installed);
    GTEST_SKIP() << "a CUDA driver is installed here";
  }
  const CommandResult r = run_with_env("env -u FRAGLAB_CUDA_DRIVER ",
                                       "replay " + (kSamples / "two-phase.jsonl").string() + " --device cuda:0");
  EXPECT_EQ(r.status, 2);
  EXPECT_NE(r.err.find("--device 'cuda:0': no CUDA driver (libcuda.so.1 cannot be loaded"), std::string::npos) << r.err;
  EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
}

TEST(Calibrate, WritesACostModelFile) {
  const fs::path dir = scratch_dir("calibrate");
  const fs::path out = dir / "costs.json";
  const fs::path ledger = dir / "ledger.txt";
  fs::remove(out);
  const CommandResult r = run_with_env(fake_env(ledger), "calibrate --device cuda:0 --repeat 2 -o " + out.string());
  ASSERT_EQ(r.status, 0) << r.err;
  const nlohmann::json file = nlohmann::json::parse(read_text(out));
  EXPECT_EQ(file["fraglab_cost_model"], 1);
  EXPECT_EQ(file["gpu"], "fraglab fake CUDA device 0");
  EXPECT_TRUE(file["source"].is_string());
  // Every call name of the cost-model format (the format fixed for `--cost-model`).
  const std::vector<std::string> names = {
      "cudaMalloc",       "cudaFree",       "cudaDeviceSynchronize", "cuMemAddressReserve",
      "cuMemAddressFree", "cuMemCreate",    "cuMemRelease",          "cuMemMap",
      "cuMemUnmap",       "cuMemSetAccess", "cudaMallocAsync_hit",   "cudaMallocAsync_miss",
      "cudaMemPoolTrimTo"};
  ASSERT_EQ(file["calls"].size(), names.size()) << file.dump();
  for (const std::string& name : names) {
    SCOPED_TRACE(name);
    const nlohmann::json& call = file["calls"].at(name);
    for (const char* key : {"fixed_us", "per_gib_us"}) {
      ASSERT_TRUE(call.at(key).is_number());
      EXPECT_GE(call.at(key).get<double>(), 0.0);
      EXPECT_TRUE(std::isfinite(call.at(key).get<double>()));
    }
    EXPECT_EQ(call.at("samples"), 20);  // 10 sizes x 2
    EXPECT_EQ(call.size(), 3u);         // fixed_us, per_gib_us, samples: nothing the format forbids
  }
  expect_clean_ledger(ledger);
  // The file is a valid --cost-model: a replay charges its figures (cudaMalloc's, for the
  // segments nocache makes), not the defaults.
  const CommandResult replay = run_fraglab("replay " + (kSamples / "two-phase.jsonl").string() +
                                           " -p nocache --json - --cost-model " + out.string());
  ASSERT_EQ(replay.status, 0) << replay.err;
  const nlohmann::json run = nlohmann::json::parse(replay.out).at("runs").at(0);
  EXPECT_TRUE(std::isfinite(run.at("device_time_s").get<double>()));
  EXPECT_GE(run.at("device_time_s").get<double>(), 0.0);
  // An existing file is not replaced without --overwrite.
  const CommandResult again = run_with_env(fake_env(ledger), "calibrate -o " + out.string());
  EXPECT_EQ(again.status, 2);
  EXPECT_NE(again.err.find("already exists"), std::string::npos) << again.err;
}

TEST(Calibrate, WithoutAGpuExitsTwo) {
  const CommandResult missing =
      run_with_env("env FRAGLAB_CUDA_DRIVER=/nonexistent/libcuda.so.1 ", "calibrate -o /dev/null");
  EXPECT_EQ(missing.status, 2);
  EXPECT_NE(missing.err.find("no CUDA driver"), std::string::npos) << missing.err;
  const CommandResult sim = run_fraglab("calibrate --device sim -o /dev/null");
  EXPECT_EQ(sim.status, 2);
  EXPECT_NE(sim.err.find("calibrate measures a GPU"), std::string::npos) << sim.err;
}

}  // namespace
}  // namespace fraglab::testing
