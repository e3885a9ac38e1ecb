#include "sim/loss_trace.h"

#include <fmt/format.h>

#include <charconv>
#include <cmath>
#include <fstream>
#include <limits>
#include <sstream>

#include "core/csv.h"

namespace loft::sim {
namespace {

constexpr int64_t kMaxIteration = 100'000'000;

}  // namespace

StatusOr<std::vector<double>> ParseLossTrace(const std::string& csv_text, const std::string& source) {
  std::istringstream in(csv_text);
  std::string line;
  if (!std::getline(in, line))
    return InvalidArgument(fmt::format("{}: empty loss trace (no header)", source));
  if (!line.empty() && line.back() == '\r') line.pop_back();
  const auto header = SplitCsvLine(line);
  int it_col = -1, loss_col = -1;
  for (size_t i = 0; i < header.size(); ++i) {
    if (header[i] == "iteration") it_col = static_cast<int>(i);
    if (header[i] == "loss") loss_col = static_cast<int>(i);
  }
  if (it_col < 0 || loss_col < 0)
    return InvalidArgument(
        fmt::format("{}:1: the header has no '{}' column (a loss trace is loftctl cluster "
                    "run's training.csv: iteration,wall_s,loss,...)",
                    source, it_col < 0 ? "iteration" : "loss"));
  std::vector<double> loss;
  int64_t line_no = 1;
  while (std::getline(in, line)) {
    ++line_no;
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (line.empty()) continue;
    const auto f = SplitCsvLine(line);
    const size_t need = static_cast<size_t>(std::max(it_col, loss_col));
    if (f.size() <= need)
      return InvalidArgument(
          fmt::format("{}:{}: {} fields, the header has {}", source, line_no, f.size(), header.size()));
    const std::string& it_text = f[static_cast<size_t>(it_col)];
    int64_t it = -1;
    const auto [p, ec] = std::from_chars(it_text.data(), it_text.data() + it_text.size(), it);
    if (ec != std::errc() || p != it_text.data() + it_text.size() || it < 0 || it >= kMaxIteration)
      return InvalidArgument(
          fmt::format("{}:{}: iteration '{}' is not an integer in [0, 1e8)", source, line_no, it_text));
    const std::string& loss_text = f[static_cast<size_t>(loss_col)];
    if (loss_text.empty()) continue;  // an iteration without a reported loss
    double v = 0;
    size_t used = 0;
    try {
      v = std::stod(loss_text, &used);
    } catch (const std::exception&) {
      used = 0;
    }
    if (used != loss_text.size() || !std::isfinite(v) || v < 0)
      return InvalidArgument(
          fmt::format("{}:{}: loss '{}' is not a finite number >= 0", source, line_no, loss_text));
    if (static_cast<size_t>(it) >= loss.size())
      loss.resize(static_cast<size_t>(it) + 1, std::numeric_limits<double>::quiet_NaN());
    loss[static_cast<size_t>(it)] = v;
  }
  if (loss.empty()) return InvalidArgument(fmt::format("{}: the loss trace has no loss", source));
  return loss;
}

StatusOr<std::vector<double>> LoadLossTrace(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  if (!f) return NotFound(fmt::format("{}: cannot read the loss trace", path));
  std::ostringstream text;
  text << f.rdbuf();
  return ParseLossTrace(text.str(), path);
}

}  // namespace loft::sim
