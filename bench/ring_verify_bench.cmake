# ring_verify_bench: round time of the MLP at N members (threads, ZeroMQ
# over tcp loopback, as the agents' ring) with verified chunks
# (byzantine_tolerance f) vs the plain ring, interleaved in one run (JSON).
if(TARGET loft_agent_lib)
  add_executable(ring_verify_bench ${CMAKE_CURRENT_LIST_DIR}/ring_verify_bench.cc)
  target_link_libraries(ring_verify_bench PRIVATE loft_agent_lib loft_models CLI11::CLI11 nlohmann_json::nlohmann_json)
  loft_add_warnings(ring_verify_bench)
endif()
