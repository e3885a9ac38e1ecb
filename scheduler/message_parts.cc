#include "scheduler/message_parts.h"

#include <memory>
#include <vector>

namespace loft::sched {
namespace {

using google::protobuf::FieldDescriptor;
using google::protobuf::Message;
using google::protobuf::Reflection;

// A field's tag and length prefix, at most (field numbers < 2^29, lengths < 2^64).
constexpr size_t kOverhead = 15;

void CopySingular(const Message& from, const FieldDescriptor* f, Message* to) {
  const Reflection* r = from.GetReflection();
  const Reflection* w = to->GetReflection();
  switch (f->cpp_type()) {
    case FieldDescriptor::CPPTYPE_INT32: w->SetInt32(to, f, r->GetInt32(from, f)); break;
    case FieldDescriptor::CPPTYPE_INT64: w->SetInt64(to, f, r->GetInt64(from, f)); break;
    case FieldDescriptor::CPPTYPE_UINT32: w->SetUInt32(to, f, r->GetUInt32(from, f)); break;
    case FieldDescriptor::CPPTYPE_UINT64: w->SetUInt64(to, f, r->GetUInt64(from, f)); break;
    case FieldDescriptor::CPPTYPE_DOUBLE: w->SetDouble(to, f, r->GetDouble(from, f)); break;
    case FieldDescriptor::CPPTYPE_FLOAT: w->SetFloat(to, f, r->GetFloat(from, f)); break;
    case FieldDescriptor::CPPTYPE_BOOL: w->SetBool(to, f, r->GetBool(from, f)); break;
    case FieldDescriptor::CPPTYPE_ENUM: w->SetEnumValue(to, f, r->GetEnumValue(from, f)); break;
    case FieldDescriptor::CPPTYPE_STRING: w->SetString(to, f, r->GetString(from, f)); break;
    case FieldDescriptor::CPPTYPE_MESSAGE: w->MutableMessage(to, f)->CopyFrom(r->GetMessage(from, f)); break;
  }
}

// Appends element i of repeated field f of `from` to `to`; returns its size bound.
size_t CopyElement(const Message& from, const FieldDescriptor* f, int i, Message* to) {
  const Reflection* r = from.GetReflection();
  const Reflection* w = to->GetReflection();
  switch (f->cpp_type()) {
    case FieldDescriptor::CPPTYPE_INT32: w->AddInt32(to, f, r->GetRepeatedInt32(from, f, i)); return 10;
    case FieldDescriptor::CPPTYPE_INT64: w->AddInt64(to, f, r->GetRepeatedInt64(from, f, i)); return 10;
    case FieldDescriptor::CPPTYPE_UINT32: w->AddUInt32(to, f, r->GetRepeatedUInt32(from, f, i)); return 10;
    case FieldDescriptor::CPPTYPE_UINT64: w->AddUInt64(to, f, r->GetRepeatedUInt64(from, f, i)); return 10;
    case FieldDescriptor::CPPTYPE_DOUBLE: w->AddDouble(to, f, r->GetRepeatedDouble(from, f, i)); return 8;
    case FieldDescriptor::CPPTYPE_FLOAT: w->AddFloat(to, f, r->GetRepeatedFloat(from, f, i)); return 4;
    case FieldDescriptor::CPPTYPE_BOOL: w->AddBool(to, f, r->GetRepeatedBool(from, f, i)); return 1;
    case FieldDescriptor::CPPTYPE_ENUM:
      w->AddEnumValue(to, f, r->GetRepeatedEnumValue(from, f, i));
      return 10;
    case FieldDescriptor::CPPTYPE_STRING: {
      const std::string s = r->GetRepeatedString(from, f, i);
      w->AddString(to, f, s);
      return s.size() + kOverhead;
    }
    case FieldDescriptor::CPPTYPE_MESSAGE: {
      const Message& m = r->GetRepeatedMessage(from, f, i);
      w->AddMessage(to, f)->CopyFrom(m);
      return m.ByteSizeLong() + kOverhead;
    }
  }
  return kOverhead;
}

size_t ElementSize(const Message& from, const FieldDescriptor* f, int i) {
  const Reflection* r = from.GetReflection();
  if (f->cpp_type() == FieldDescriptor::CPPTYPE_MESSAGE)
    return r->GetRepeatedMessage(from, f, i).ByteSizeLong() + kOverhead;
  if (f->cpp_type() == FieldDescriptor::CPPTYPE_STRING) {
    std::string scratch;
    return r->GetRepeatedStringReference(from, f, i, &scratch).size() + kOverhead;
  }
  return 10;
}

class Splitter {
 public:
  explicit Splitter(size_t limit) : limit_(limit < 2 * kOverhead ? 2 * kOverhead : limit) {}

  Status Split(const Message& m, const std::function<Status(const Message&)>& emit) const {
    if (m.ByteSizeLong() <= limit_) return emit(m);
    const Reflection* r = m.GetReflection();
    std::vector<const FieldDescriptor*> fields;
    r->ListFields(m, &fields);
    std::unique_ptr<Message> cur(m.New());
    size_t size = 0;  // an upper bound of cur's ByteSizeLong
    auto flush = [&]() -> Status {
      if (size == 0) return OkStatus();
      Status st = emit(*cur);
      cur.reset(m.New());
      size = 0;
      return st;
    };
    for (const FieldDescriptor* f : fields) {
      if (f->is_repeated() || f->cpp_type() == FieldDescriptor::CPPTYPE_MESSAGE) continue;
      CopySingular(m, f, cur.get());
    }
    size = cur->ByteSizeLong();
    for (const FieldDescriptor* f : fields) {
      if (f->is_repeated()) {
        const int n = r->FieldSize(m, f);
        for (int i = 0; i < n; ++i) {
          if (size > 0 && size + ElementSize(m, f, i) > limit_) LOFT_RETURN_IF_ERROR(flush());
          size += CopyElement(m, f, i, cur.get());
        }
      } else if (f->cpp_type() == FieldDescriptor::CPPTYPE_MESSAGE) {
        const Message& sub = r->GetMessage(m, f);
        const size_t n = sub.ByteSizeLong() + kOverhead;
        if (n <= limit_) {
          if (size > 0 && size + n > limit_) LOFT_RETURN_IF_ERROR(flush());
          CopySingular(m, f, cur.get());
          size += n;
          continue;
        }
        LOFT_RETURN_IF_ERROR(flush());
        const Splitter inner(limit_ - kOverhead);
        LOFT_RETURN_IF_ERROR(inner.Split(sub, [&](const Message& piece) {
          std::unique_ptr<Message> wrapped(m.New());
          wrapped->GetReflection()->MutableMessage(wrapped.get(), f)->CopyFrom(piece);
          return emit(*wrapped);
        }));
      }
    }
    return flush();
  }

 private:
  size_t limit_;
};

}  // namespace

Status SplitMessage(const Message& message, size_t limit, const std::function<Status(const Message&)>& emit) {
  return Splitter(limit).Split(message, emit);
}

}  // namespace loft::sched
