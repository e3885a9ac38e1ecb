// WriteFileDurably: replace a small file so that after a crash or power
// loss it holds either the old or the new contents, never a torn or empty
// one: write `<path>.tmp`, fsync it, rename it over `path`, fsync the
// directory (the rename itself). Used for the scheduler's job_id and
// sessions.json.
//
// Not responsible for: large files (one write call), concurrent writers.
// Thread-safety: safe for different paths.
#pragma once

#include <string>
#include <string_view>

#include "core/status.h"

namespace loft {

// IOError naming the file and the failing step (open, write, fsync,
// rename, directory fsync) with errno's text.
Status WriteFileDurably(const std::string& path, std::string_view contents);

}  // namespace loft
