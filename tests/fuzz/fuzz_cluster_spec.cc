// Fuzz target: the cluster spec loader (core/cluster_spec). Any text either
// fails ParseClusterSpec with a message naming the source, or yields a spec
// whose accessors are consistent. Never a crash, uncaught exception or hang.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>

#include "core/cluster_spec.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  auto spec = loft::ParseClusterSpec(text, "fuzz.yaml");
  if (!spec.ok()) {
    if (spec.status().message().find("fuzz.yaml") == std::string::npos) std::abort();
    return 0;
  }
  if (spec->num_nodes() <= 0) std::abort();
  for (int i = 0; i < spec->num_nodes(); ++i) {
    if (spec->FindNode(spec->nodes[static_cast<size_t>(i)].name) != i) std::abort();  // unique names
    if (spec->MaxBatch(i) <= 0) std::abort();
  }
  return 0;
}
