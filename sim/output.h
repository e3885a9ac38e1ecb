// Writers for loft-sim's output directory: iterations.csv (one row per
// worker per iteration), trace.json (Chrome trace event format: one
// process per policy, one thread/track per worker with "local read",
// "remote read", "compute", "wait" and "down" spans; loads in Perfetto and
// chrome://tracing) and the SummaryFile behind summary.json.
// Output is a pure function of the results: fixed column order, fixed
// number formatting, policies in the order given.
//
// Not responsible for: running the simulation.
// Thread-safety: plain functions.
#pragma once

#include <ostream>
#include <span>
#include <string>

#include "core/cluster_spec.h"
#include "core/status.h"
#include "sim/simulator.h"
#include "sim/summary.h"

namespace loft::sim {

// The run recorder's iterations.csv (sched::kIterationsCsvHeader, the
// same header as `loftctl cluster run`); plan_ms, stream_ms, ack_ms and
// allreduce_ms are 0 (not modelled).
void WriteIterationsCsv(std::span<const SimResult> results, const ClusterSpec& spec, std::ostream& out);
void WriteTraceJson(std::span<const SimResult> results, const ClusterSpec& spec, std::ostream& out);

// Per-policy summaries; the bound comes from the first result that
// computed one.
SummaryFile MakeSummaryFile(std::span<const SimResult> results);

// Creates `dir` if needed and writes summary.json, iterations.csv and
// trace.json into it.
Status WriteOutputDir(std::span<const SimResult> results, const ClusterSpec& spec, const std::string& dir);

}  // namespace loft::sim
