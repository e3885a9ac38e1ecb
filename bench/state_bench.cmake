# state_bench: JobDriver::PlanNextIteration + ack latency at scale, split
# into policy / assign / rest (scheduler/README-state.md). Prints JSON.
add_executable(state_bench ${CMAKE_CURRENT_LIST_DIR}/state_bench.cc)
target_link_libraries(state_bench PRIVATE loft_scheduler nlohmann_json::nlohmann_json spdlog::spdlog)
loft_add_warnings(state_bench)
