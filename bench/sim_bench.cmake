# sim_bench: loft-sim throughput on the 1024-node example (JSON on stdout).
add_executable(sim_bench ${CMAKE_CURRENT_SOURCE_DIR}/sim_bench.cc)
target_link_libraries(sim_bench PRIVATE loft_sim)
target_compile_definitions(sim_bench PRIVATE LOFT_SOURCE_DIR="${CMAKE_SOURCE_DIR}")
loft_add_warnings(sim_bench)
