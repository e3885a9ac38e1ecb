// A training loss trace for loft-sim: the per-iteration mean loss of a
// real run, so that `training.exchange.period: auto` picks its periods in
// virtual time as it did for real.
//
// The simulator trains no model. period: auto's progress rule (AdaComm's
// sqrt(F_k / F_0), scheduler/exchange_plan.h) shrinks the period as the
// loss the members report falls, so without losses loft-sim keeps the
// first rounds' period for the whole run and runs fewer exchanges than the
// real job. `loft-sim run --loss-trace RUN/training.csv` reports, with each
// partition of iteration t, the loss the real run recorded at t (the
// columns `iteration` and `loss` of `loftctl cluster run`'s training.csv);
// an iteration missing from the trace or past its end reports none, as a
// member without a model does.
//
// Not responsible for: predicting a loss curve (a planner with no real run
// gets the first round's period throughout, and loft-sim's summary says
// so).
#pragma once

#include <string>
#include <vector>

#include "core/status.h"

namespace loft::sim {

// Per iteration (index = iteration) the loss, NaN where the trace has
// none. Errors name the file, the line and what was wrong (no header with
// `iteration` and `loss`, a field that is not a number, a negative or
// non-finite loss, an iteration out of [0, 10^8)).
StatusOr<std::vector<double>> ParseLossTrace(const std::string& csv_text, const std::string& source);
StatusOr<std::vector<double>> LoadLossTrace(const std::string& path);

}  // namespace loft::sim
