# sched_overhead_bench: time for loft-scheduler's service layer to plan one
# iteration, journal it and stream it to 64 agents (64 DEALER sockets in
# this process, inproc transport), and to take the 64 acks back. JSON out.
add_executable(sched_overhead_bench ${CMAKE_CURRENT_LIST_DIR}/sched_overhead_bench.cc)
target_link_libraries(sched_overhead_bench PRIVATE loft_server_lib nlohmann_json::nlohmann_json)
loft_add_warnings(sched_overhead_bench)
