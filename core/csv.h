// SplitCsvLine: the fields of one line of the CSV files loft writes
// (iterations.csv, training.csv: no quoting, no embedded commas).
#pragma once

#include <sstream>
#include <string>
#include <vector>

namespace loft {

// Splits at commas; an empty last field ("a,b,") is a field.
inline std::vector<std::string> SplitCsvLine(const std::string& line) {
  std::vector<std::string> f;
  std::istringstream in(line);
  std::string x;
  while (std::getline(in, x, ',')) f.push_back(x);
  if (!line.empty() && line.back() == ',') f.emplace_back();
  return f;
}

}  // namespace loft
