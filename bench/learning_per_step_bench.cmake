# learning_per_step_bench: replays the per-worker batch sizes loft-sim
# planned (iterations.csv) and trains the real MLP on Fashion-MNIST with the
# agents' aggregation (weights, trimming, reducer, SGD): test accuracy per
# step by policy and seed (docs/learning-per-step.md). Prints JSON.
add_executable(learning_per_step_bench ${CMAKE_CURRENT_LIST_DIR}/learning_per_step_bench.cc)
target_link_libraries(learning_per_step_bench PRIVATE loft_agent_lib loft_models loft_cache loft_core CLI11::CLI11
                      nlohmann_json::nlohmann_json)
loft_add_warnings(learning_per_step_bench)
