# preprocess_bench: the preprocessing stage of dataset.encoding jpeg
# (decode + crop_flip + resize + normalise) vs tjDecompress2 alone, per
# thread, and the pool's throughput (JSON on stdout).
add_executable(preprocess_bench ${CMAKE_CURRENT_SOURCE_DIR}/preprocess_bench.cc)
target_link_libraries(preprocess_bench PRIVATE loft_preprocess loft_cache PkgConfig::TURBOJPEG
                      nlohmann_json::nlohmann_json)
loft_add_warnings(preprocess_bench)
