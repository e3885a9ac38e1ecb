// Fuzz target: `loftctl calibrate RUN`'s inputs (tools/loftctl/calibrate.h):
// a run's status.json (the scheduler's status document) and its
// iterations.csv, against a fixed 3-node spec (fuzz_specs.h).
//
// Input: a mode byte, then
//   bit 0 clear: the status JSON (the rest of the input), CalibrateSpec
//                without an iterations.csv;
//   bit 0 set:   a u16 length, that many bytes of status JSON, then the
//                iterations.csv text;
//   bit 1: fit_links false (links kept from the spec).
// loft-sim's ring matching (match_ring) is not run (seconds per input).
//
// Properties beyond "no crash, no sanitizer report, no exception":
//  - a refusal names its source (status.json or iterations.csv);
//  - a calibrated spec loads (ParseClusterSpec) with the same nodes: what
//    calibrate writes, loft-sim and `cluster run` must be able to read.
#include <google/protobuf/stubs/logging.h>
#include <spdlog/spdlog.h>

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <nlohmann/json.hpp>
#include <string>

#include "core/cluster_spec.h"
#include "fuzz_input.h"
#include "fuzz_specs.h"
#include "tools/loftctl/calibrate.h"

namespace {

using loft::fuzz::Fail;
using loft::fuzz::FuzzInput;

const bool kQuiet = [] {
  google::protobuf::SetLogHandler(nullptr);
  spdlog::set_level(spdlog::level::off);
  return true;
}();

const loft::ClusterSpec& Spec() {
  static const loft::ClusterSpec spec = [] {
    auto s = loft::ParseClusterSpec(loft::fuzz::kCalibrateSpec, "cal.yaml");
    if (!s.ok()) Fail("the target's own spec: " + s.status().ToString());
    return *s;
  }();
  return spec;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  (void)kQuiet;
  FuzzInput in(data, size);
  const uint8_t mode = in.U8();
  const bool with_csv = (mode & 1) != 0;
  const std::string status_text = with_csv ? in.Take(in.U16()) : in.Take(in.remaining());
  const std::string csv = with_csv ? in.Take(in.remaining()) : "";
  const nlohmann::json status = nlohmann::json::parse(status_text, nullptr, /*allow_exceptions=*/false);
  if (status.is_discarded()) return 0;  // loftctl refuses text that is not JSON before calibrating
  auto cal =
      loft::ctl::CalibrateSpec(Spec(), status, "status.json", with_csv ? &csv : nullptr, "iterations.csv",
                               /*fit_links=*/(mode & 2) == 0);
  if (loft::fuzz::Tracing()) std::fprintf(stderr, "calibrate: %s\n", cal.status().ToString().c_str());
  if (!cal.ok()) {
    const std::string& m = cal.status().message();
    if (m.find("status.json") == std::string::npos && m.find("iterations.csv") == std::string::npos)
      Fail("a refusal that names neither input: " + cal.status().ToString());
    return 0;
  }
  auto back = loft::ParseClusterSpec(cal->yaml, "calibrated.yaml");
  if (!back.ok()) Fail("the calibrated spec does not load: " + back.status().ToString() + "\n" + cal->yaml);
  if (back->num_nodes() != Spec().num_nodes()) Fail("the calibrated spec has other nodes");
  return 0;
}
