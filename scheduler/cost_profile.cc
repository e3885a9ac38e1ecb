#include "scheduler/cost_profile.h"

namespace loft::sched {

std::array<double, kCostFields.size()> CostToArray(const CostParams& c) {
  std::array<double, kCostFields.size()> v{};
  for (size_t i = 0; i < kCostFields.size(); ++i) v[i] = c.*kCostFields[i].member;
  return v;
}

CostParams CostFromArray(std::span<const double, kCostFields.size()> v) {
  CostParams c;
  for (size_t i = 0; i < kCostFields.size(); ++i) c.*kCostFields[i].member = v[i];
  return c;
}

nlohmann::json CostToJson(const CostParams& c) {
  nlohmann::json j = nlohmann::json::object();
  for (const CostField& f : kCostFields) j[std::string(f.name)] = c.*f.member;
  return j;
}

StatusOr<CostParams> CostFromJson(const nlohmann::json& j, std::string_view where) {
  CostParams c;
  for (const CostField& f : kCostFields) {
    const std::string key(f.name);
    if (!j.is_object() || !j.contains(key) || !j[key].is_number())
      return InvalidArgument(std::string(where) + "." + key + " is missing");
    c.*f.member = j[key].get<double>();
  }
  return c;
}

}  // namespace loft::sched
