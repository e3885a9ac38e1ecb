#include "sim/output.h"

#include <fmt/format.h>

#include <filesystem>
#include <fstream>
#include <iterator>
#include <vector>

namespace loft::sim {

namespace {
// JSON string escaping for node and policy names.
std::string JsonString(const std::string& s) {
  std::string out = "\"";
  for (char c : s) {
    if (c == '"' || c == '\\') {
      out += '\\';
      out += c;
    } else if (static_cast<unsigned char>(c) < 0x20) {
      out += fmt::format("\\u{:04x}", static_cast<int>(c));
    } else {
      out += c;
    }
  }
  return out + "\"";
}
}  // namespace

void WriteIterationsCsv(std::span<const SimResult> results, const ClusterSpec& spec, std::ostream& out) {
  std::vector<std::string> names;
  names.reserve(spec.nodes.size());
  for (const auto& n : spec.nodes) names.push_back(n.name);
  sched::WriteIterationsCsvHeader(out);
  for (const SimResult& r : results) sched::WriteIterationsCsvRows(r.policy, r.iterations, names, out);
}

void WriteTraceJson(std::span<const SimResult> results, const ClusterSpec& spec, std::ostream& out) {
  fmt::memory_buffer buf;
  auto put = [&](std::string_view s) { buf.append(s.data(), s.data() + s.size()); };
  put("{\"displayTimeUnit\":\"ms\",\"traceEvents\":[\n");
  bool first = true;
  auto sep = [&] {
    if (!first) put(",\n");
    first = false;
  };
  for (size_t pid = 0; pid < results.size(); ++pid) {
    const SimResult& r = results[pid];
    sep();
    fmt::format_to(std::back_inserter(buf),
                   R"({{"ph":"M","pid":{},"name":"process_name","args":{{"name":{}}}}})", pid + 1,
                   JsonString("policy " + r.policy));
    for (int n = 0; n < spec.num_nodes(); ++n) {
      sep();
      fmt::format_to(std::back_inserter(buf),
                     R"({{"ph":"M","pid":{},"tid":{},"name":"thread_name","args":{{"name":{}}}}})", pid + 1,
                     n, JsonString(spec.nodes[n].name));
    }
    for (const TraceSpan& s : r.spans) {
      sep();
      // ts and dur in microseconds.
      fmt::format_to(
          std::back_inserter(buf),
          R"({{"ph":"X","pid":{},"tid":{},"name":"{}","cat":"sim","ts":{:.3f},"dur":{:.3f},"args":{{"iteration":{}}}}})",
          pid + 1, s.node, s.name, s.start_ms * 1000.0, s.dur_ms * 1000.0, s.iteration);
      if (buf.size() > (1 << 20)) {
        out.write(buf.data(), static_cast<std::streamsize>(buf.size()));
        buf.clear();
      }
    }
  }
  put("\n]}\n");
  out.write(buf.data(), static_cast<std::streamsize>(buf.size()));
}

SummaryFile MakeSummaryFile(std::span<const SimResult> results) {
  SummaryFile s;
  for (const SimResult& r : results) {
    s.policies[r.policy] = r.summary;
    if (!s.bound_mean_iteration_ms && r.bound_mean_iteration_ms >= 0) {
      s.bound_mean_iteration_ms = r.bound_mean_iteration_ms;
    }
    if (!s.bound_epoch_mean_iteration_ms && r.bound_epoch_mean_iteration_ms >= 0) {
      s.bound_epoch_mean_iteration_ms = r.bound_epoch_mean_iteration_ms;
    }
  }
  return s;
}

Status WriteOutputDir(std::span<const SimResult> results, const ClusterSpec& spec, const std::string& dir) {
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) return IOError("cannot create output directory " + dir + ": " + ec.message());
  LOFT_RETURN_IF_ERROR(WriteSummaryJson(MakeSummaryFile(results), dir + "/summary.json"));
  {
    const std::string path = dir + "/iterations.csv";
    std::ofstream out(path, std::ios::binary | std::ios::trunc);
    if (!out) return IOError("cannot open " + path + " for writing");
    WriteIterationsCsv(results, spec, out);
    if (!out) return IOError("error writing " + path);
  }
  {
    const std::string path = dir + "/trace.json";
    std::ofstream out(path, std::ios::binary | std::ios::trunc);
    if (!out) return IOError("cannot open " + path + " for writing");
    WriteTraceJson(results, spec, out);
    if (!out) return IOError("error writing " + path);
  }
  return OkStatus();
}

}  // namespace loft::sim
