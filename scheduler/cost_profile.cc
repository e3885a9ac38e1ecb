#include "scheduler/cost_profile.h"

#include <google/protobuf/descriptor.h>
#include <google/protobuf/message.h>

#include <cstdio>
#include <cstdlib>

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

namespace {
// v1::CostProfile's field for each entry of kCostFields, by name. A
// mismatch between the two lists is a build mistake (cost_profile_test
// names it); here it aborts instead of dropping a field.
const std::array<const google::protobuf::FieldDescriptor*, kCostFields.size()>& ProtoFields() {
  static const auto fields = [] {
    std::array<const google::protobuf::FieldDescriptor*, kCostFields.size()> f{};
    const google::protobuf::Descriptor* d = v1::CostProfile::descriptor();
    for (size_t i = 0; i < kCostFields.size(); ++i) {
      f[i] = d->FindFieldByName(std::string(kCostFields[i].name));
      if (f[i] == nullptr || f[i]->cpp_type() != google::protobuf::FieldDescriptor::CPPTYPE_DOUBLE) {
        std::fprintf(stderr,
                     "loft: v1::CostProfile has no double field '%.*s' (kCostFields and the proto differ)\n",
                     static_cast<int>(kCostFields[i].name.size()), kCostFields[i].name.data());
        std::abort();
      }
    }
    return f;
  }();
  return fields;
}
}  // namespace

void CostToProto(const CostParams& c, v1::CostProfile* out) {
  const auto* refl = out->GetReflection();
  for (size_t i = 0; i < kCostFields.size(); ++i)
    refl->SetDouble(out, ProtoFields()[i], c.*kCostFields[i].member);
}

CostParams CostFromProto(const v1::CostProfile& p) {
  CostParams c;
  const auto* refl = p.GetReflection();
  for (size_t i = 0; i < kCostFields.size(); ++i)
    c.*kCostFields[i].member = refl->GetDouble(p, ProtoFields()[i]);
  return c;
}

}  // namespace loft::sched
