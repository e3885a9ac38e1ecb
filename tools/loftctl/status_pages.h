// Reading every row of a run from the scheduler, a page at a time: a
// StatusReply carries at most one page of rows (server/status_reply.h,
// kMaxStatusRows), from the row the request names (StatusRequest.rows_from).
// `loftctl cluster run` uses it for iterations.csv.
// Pure: the caller's `fetch` sends the requests.
// Not responsible for: sockets, retries (fetch does both), the rows' meaning.
// Thread-safety: stateless.
#pragma once

#include <cstdint>
#include <functional>

#include "core/proto/loft.pb.h"
#include "core/status.h"

namespace loft::ctl {

// `fetch(from)`: the scheduler's reply to a StatusRequest with include_rows
// and rows_from = from. Returns the last reply with run().rows() holding
// every kept row in order (each page's rows appended). DataLoss when a page
// starts at another row than asked, or is empty while the scheduler says it
// keeps more (no endless loop). A scheduler older than paging (rows_kept 0)
// sent every row in its one reply.
StatusOr<v1::StatusReply> ReadAllRowPages(const std::function<StatusOr<v1::StatusReply>(int64_t)>& fetch);

}  // namespace loft::ctl
