#include "tools/loftctl/run_deadline.h"

#include <fmt/format.h>

namespace loft::ctl {

Status RunDeadlines::Validate() const {
  if (!(no_progress_s >= 0))
    return InvalidArgument(
        fmt::format("--no-progress-timeout-s must be >= 0 (0 = never), got {}", no_progress_s));
  if (!(deadline_s >= 0))
    return InvalidArgument(fmt::format("--timeout-s must be >= 0 (0 = no deadline), got {}", deadline_s));
  return OkStatus();
}

void ProgressWatch::Observe(int64_t iterations_completed, double now_s) {
  if (iterations_completed > completed_) {
    completed_ = iterations_completed;
    progress_s_ = now_s;
  }
}

std::optional<RunStop> ProgressWatch::Due(double now_s) const {
  if (d_.deadline_s > 0 && now_s - start_s_ >= d_.deadline_s) {
    return RunStop{"deadline", DeadlineExceeded(fmt::format("the job did not finish within --timeout-s {} s "
                                                            "({} iterations completed)",
                                                            d_.deadline_s, completed_))};
  }
  if (d_.no_progress_s > 0 && now_s - progress_s_ >= d_.no_progress_s) {
    return RunStop{"no_progress",
                   DeadlineExceeded(fmt::format("no iteration completed for {} s (--no-progress-timeout-s; "
                                                "{} iterations completed)",
                                                d_.no_progress_s, completed_))};
  }
  return std::nullopt;
}

}  // namespace loft::ctl
