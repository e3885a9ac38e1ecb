# cache_bench: SampleCache ingest/Get/MultiGet vs raw RocksDB MultiGet on
# the Fashion-MNIST training split (JSON on stdout).
add_executable(cache_bench ${CMAKE_CURRENT_SOURCE_DIR}/cache_bench.cc)
target_link_libraries(cache_bench PRIVATE loft_cache nlohmann_json::nlohmann_json)
loft_add_warnings(cache_bench)
