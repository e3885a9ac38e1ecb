# train_bench: MLP forward+backward samples/s on one core vs the raw
# cblas_sgemm rate for the same shapes, and single-process reference
# training on Fashion-MNIST (JSON on stdout).
add_executable(train_bench ${CMAKE_CURRENT_LIST_DIR}/train_bench.cc)
target_link_libraries(train_bench PRIVATE loft_models loft_cache CLI11::CLI11 nlohmann_json::nlohmann_json)
loft_add_warnings(train_bench)
