# planner_bench: plan latency at scale and plan quality over the random
# suite (scheduler/README-planning.md). Prints JSON.
add_executable(planner_bench ${CMAKE_CURRENT_SOURCE_DIR}/planner_bench.cc)
target_link_libraries(planner_bench PRIVATE loft_scheduler nlohmann_json::nlohmann_json)
loft_add_warnings(planner_bench)
