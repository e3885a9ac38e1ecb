# ring_compress_bench: bytes, all-reduce time and error of int8 compression
# vs none for the MLP's gradient at N members (threads, ZeroMQ over tcp
# loopback, as the agents' ring), plain ring and verified chunks (JSON).
if(TARGET loft_agent_lib)
  add_executable(ring_compress_bench ${CMAKE_CURRENT_LIST_DIR}/ring_compress_bench.cc)
  target_link_libraries(ring_compress_bench PRIVATE loft_agent_lib loft_models CLI11::CLI11 nlohmann_json::nlohmann_json)
  loft_add_warnings(ring_compress_bench)
endif()
