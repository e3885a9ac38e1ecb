#include "tools/loftctl/status_pages.h"

#include <fmt/format.h>

namespace loft::ctl {

StatusOr<v1::StatusReply> ReadAllRowPages(const std::function<StatusOr<v1::StatusReply>(int64_t)>& fetch) {
  LOFT_ASSIGN_OR_RETURN(v1::StatusReply all, fetch(0));
  int64_t from = all.run().rows_size();
  while (from < all.run().rows_kept()) {
    LOFT_ASSIGN_OR_RETURN(v1::StatusReply page, fetch(from));
    const v1::RunSummary& run = page.run();
    if (run.rows_from() != from || run.rows_size() == 0) {
      return DataLoss(
          fmt::format("status rows: asked for rows from {} of {}, the scheduler sent {} rows from {} (of {})",
                      from, all.run().rows_kept(), run.rows_size(), run.rows_from(), run.rows_kept()));
    }
    from += run.rows_size();
    // The newest document and figures, with every row so far.
    google::protobuf::RepeatedPtrField<v1::WorkerIterationRow> rows;
    rows.Swap(all.mutable_run()->mutable_rows());
    for (auto& r : *page.mutable_run()->mutable_rows()) *rows.Add() = std::move(r);
    page.mutable_run()->mutable_rows()->Swap(&rows);
    all = std::move(page);
  }
  return all;
}

}  // namespace loft::ctl
