// Fuzz target: the files the daemons and tools load besides the cluster
// spec. The first byte picks the loader; the rest is the file:
//   0: scheduler options YAML (server::ParseSchedulerOptions)
//   1: agent config YAML (agent::ParseAgentConfig)
//   2: sessions.json (server::ParseSessions)
//   3: dataset manifest file (cache::ReadManifestFile; MANIFEST.loft)
//   4: IDX image + label files (cache::ReadIdx): a u16 length, that many
//      bytes of the image file, the rest the label file, each written
//      gzip-compressed (as the dataset ships), so mutations reach the IDX
//      parser rather than the inflater.
//
// Properties beyond "no crash, no sanitizer report":
//  - a refusal names what was wrong (non-empty message; for the YAML and
//    JSON loaders, the source name);
//  - whatever loads writes back (SchedulerOptionsToYaml, AgentConfigToYaml,
//    SessionsToJson) to text that loads to the same text (a fixed point);
//  - a loaded manifest has 16 bytes per sample and the same root when
//    rebuilt from its digests; a loaded IDX dataset holds count × rows ×
//    cols image bytes and count labels.
#include <spdlog/spdlog.h>
#include <unistd.h>
#include <zlib.h>

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <string>

#include "cache/idx_reader.h"
#include "cache/manifest.h"
#include "edge_agent/agent_config.h"
#include "fuzz_input.h"
#include "server/options.h"
#include "server/sessions_file.h"

namespace {

namespace fs = std::filesystem;
using loft::fuzz::Fail;
using loft::fuzz::FuzzInput;

const bool kQuiet = [] {
  spdlog::set_level(spdlog::level::off);
  return true;
}();

fs::path Scratch(const std::string& name) {
  const fs::path base = loft::fuzz::ScratchBase();
  return base / ("loft-fuzz-loaders-" + std::to_string(::getpid()) + "-" + name);
}

void WriteFile(const fs::path& p, const std::string& bytes) {
  std::ofstream out(p, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

void WriteGz(const fs::path& p, const std::string& bytes) {
  gzFile f = gzopen(p.c_str(), "wb1");
  if (f == nullptr) Fail("gzopen " + p.string());
  if (!bytes.empty()) gzwrite(f, bytes.data(), static_cast<unsigned>(bytes.size()));
  gzclose(f);
}

void Refused(const loft::Status& st, const char* source) {
  if (st.message().empty()) Fail("a refusal without a message");
  if (source != nullptr && st.message().find(source) == std::string::npos)
    Fail("a refusal that does not name " + std::string(source) + ": " + st.ToString());
}

void SchedulerOptions(const std::string& text) {
  loft::server::SchedulerOptions o;
  loft::Status st = loft::server::ParseSchedulerOptions(text, "fuzz.yaml", &o);
  if (!st.ok()) return Refused(st, "fuzz.yaml");
  const std::string yaml = loft::server::SchedulerOptionsToYaml(o);
  loft::server::SchedulerOptions back;
  st = loft::server::ParseSchedulerOptions(yaml, "written", &back);
  if (!st.ok()) Fail("written scheduler options do not load: " + st.ToString() + "\n" + yaml);
  if (loft::server::SchedulerOptionsToYaml(back) != yaml)
    Fail("scheduler options change when written:\n" + yaml);
}

void AgentConfig(const std::string& text) {
  auto c = loft::agent::ParseAgentConfig(text, "fuzz.yaml");
  if (!c.ok()) return Refused(c.status(), "fuzz.yaml");
  const std::string yaml = loft::agent::AgentConfigToYaml(*c);
  auto back = loft::agent::ParseAgentConfig(yaml, "written");
  if (!back.ok()) Fail("a written agent config does not load: " + back.status().ToString() + "\n" + yaml);
  if (loft::agent::AgentConfigToYaml(*back) != yaml) Fail("an agent config changes when written:\n" + yaml);
}

void Sessions(const std::string& text) {
  auto s = loft::server::ParseSessions(text, "fuzz.json");
  if (!s.ok()) return Refused(s.status(), "fuzz.json");
  const std::string json = loft::server::SessionsToJson(*s);
  auto back = loft::server::ParseSessions(json, "written");
  if (!back.ok()) Fail("written sessions do not load: " + back.status().ToString() + "\n" + json);
  if (loft::server::SessionsToJson(*back) != json) Fail("sessions change when written:\n" + json);
}

void ManifestFile(const std::string& bytes) {
  const fs::path p = Scratch("manifest");
  WriteFile(p, bytes);
  auto m = loft::cache::ReadManifestFile(p.string());
  fs::remove(p);
  if (!m.ok()) return Refused(m.status(), nullptr);
  if (m->digests().size() != static_cast<size_t>(m->size()) * loft::cache::kSampleDigestBytes)
    Fail("manifest size and digests disagree");
  auto again = loft::cache::Manifest::FromDigests(m->digests());
  if (!again.ok() || again->Root() != m->Root()) Fail("manifest root differs when rebuilt from its digests");
}

void Idx(FuzzInput& in) {
  const fs::path images = Scratch("images.gz");
  const fs::path labels = Scratch("labels.gz");
  WriteGz(images, in.Take(in.U16()));
  WriteGz(labels, in.Take(in.remaining()));
  auto ds = loft::cache::ReadIdx(images.string(), labels.string());
  fs::remove(images);
  fs::remove(labels);
  if (!ds.ok()) return Refused(ds.status(), nullptr);
  if (ds->count < 0 || ds->rows < 0 || ds->cols < 0 ||
      ds->images.size() !=
          static_cast<size_t>(ds->count) * static_cast<size_t>(ds->rows) * static_cast<size_t>(ds->cols) ||
      ds->labels.size() != static_cast<size_t>(ds->count))
    Fail("IDX dataset sizes disagree");
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  (void)kQuiet;
  FuzzInput in(data, size);
  switch (in.U8() % 5) {
    case 0: SchedulerOptions(in.Take(in.remaining())); break;
    case 1: AgentConfig(in.Take(in.remaining())); break;
    case 2: Sessions(in.Take(in.remaining())); break;
    case 3: ManifestFile(in.Take(in.remaining())); break;
    default: Idx(in); break;
  }
  return 0;
}
