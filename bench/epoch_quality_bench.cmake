# epoch_quality_bench: loft-epoch vs bound-epoch and loft over whole epochs
# on the random epoch suite (scheduler/README-planning.md). Prints JSON.
add_executable(epoch_quality_bench ${CMAKE_CURRENT_SOURCE_DIR}/epoch_quality_bench.cc)
target_link_libraries(epoch_quality_bench PRIVATE loft_scheduler nlohmann_json::nlohmann_json)
loft_add_warnings(epoch_quality_bench)
