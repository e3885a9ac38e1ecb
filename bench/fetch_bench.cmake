# fetch_bench: peer-fetch samples/s through a real loft-agent server (tcp
# loopback, one client one server, batches of 64 784-byte samples) vs raw
# RocksDB MultiGet and raw ZeroMQ request/reply of the same bytes, in one
# run on the same data (JSON on stdout).
add_executable(fetch_bench ${CMAKE_CURRENT_LIST_DIR}/fetch_bench.cc)
target_link_libraries(fetch_bench PRIVATE loft_agent_lib RocksDB::rocksdb nlohmann_json::nlohmann_json)
loft_add_warnings(fetch_bench)
