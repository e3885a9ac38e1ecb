# Training integration tests: real loft-scheduler + loft-agents
# via `loftctl cluster run` on Fashion-MNIST, and the ZeroMQ ring transport.
if(Python3_Interpreter_FOUND AND TARGET loft-agent AND TARGET loft-scheduler)
  foreach(t training training_exchange training_byzantine training_rejoin training_zero_batch training_attack
          poison_serve robust_default eviction)
    add_test(NAME integration:${t}
             COMMAND ${Python3_EXECUTABLE} ${CMAKE_CURRENT_SOURCE_DIR}/${t}_test.py)
    set_tests_properties(integration:${t} PROPERTIES
      LABELS integration TIMEOUT 900 RUN_SERIAL ON
      ENVIRONMENT "LOFT_BIN_DIR=${CMAKE_BINARY_DIR}/bin;PYTHONDONTWRITEBYTECODE=1")
  endforeach()
  # poison_serve: uniform policy + replication 2 make every run read from the
  # poisoner in iteration 0; it is distrusted after the first reports.
  # jpeg_training: JPEG records through the agents' preprocessing stage;
  # its second run cuts one record with cache_corrupt_record (defined in
  # CMakeLists.txt after this file is included: a generator expression).
  if(TARGET loftctl AND TARGET loft_cache)
    add_test(NAME integration:jpeg_training
             COMMAND ${Python3_EXECUTABLE} ${CMAKE_CURRENT_SOURCE_DIR}/jpeg_training_test.py)
    set_tests_properties(integration:jpeg_training PROPERTIES
      LABELS integration TIMEOUT 900 RUN_SERIAL ON
      ENVIRONMENT "LOFT_BIN_DIR=${CMAKE_BINARY_DIR}/bin;PYTHONDONTWRITEBYTECODE=1;LOFT_CORRUPT_RECORD=$<TARGET_FILE:cache_corrupt_record>")
    # decoded_serving: decode_placement auto, holders preprocess for a
    # 0.05-core node; its second run has a poison_decoded holder that the
    # spot check reports.
    add_test(NAME integration:decoded_serving
             COMMAND ${Python3_EXECUTABLE} ${CMAKE_CURRENT_SOURCE_DIR}/decoded_serving_test.py)
    set_tests_properties(integration:decoded_serving PROPERTIES
      LABELS integration TIMEOUT 900 RUN_SERIAL ON
      ENVIRONMENT "LOFT_BIN_DIR=${CMAKE_BINARY_DIR}/bin;PYTHONDONTWRITEBYTECODE=1")
  endif()
endif()
if(TARGET loft_agent_lib)
  add_executable(zmq_transport_test ${CMAKE_CURRENT_SOURCE_DIR}/zmq_transport_test.cc)
  target_link_libraries(zmq_transport_test PRIVATE loft_agent_lib loft_models Catch2::Catch2WithMain)
  loft_add_warnings(zmq_transport_test)
  add_test(NAME integration:zmq_transport COMMAND zmq_transport_test)
  set_tests_properties(integration:zmq_transport PROPERTIES LABELS integration TIMEOUT 120)
endif()
if(TARGET loft_agent_lib)
  add_executable(ring_guard_test ${CMAKE_CURRENT_SOURCE_DIR}/ring_guard_test.cc)
  target_link_libraries(ring_guard_test PRIVATE loft_agent_lib loft_models Catch2::Catch2WithMain)
  loft_add_warnings(ring_guard_test)
  add_test(NAME integration:ring_guard COMMAND ring_guard_test)
  set_tests_properties(integration:ring_guard PROPERTIES LABELS integration TIMEOUT 120)
  add_executable(external_ring_test ${CMAKE_CURRENT_SOURCE_DIR}/external_ring_test.cc)
  target_link_libraries(external_ring_test PRIVATE loft_agent_lib loft_models Catch2::Catch2WithMain)
  loft_add_warnings(external_ring_test)
  add_test(NAME integration:external_ring COMMAND external_ring_test)
  set_tests_properties(integration:external_ring PROPERTIES LABELS integration TIMEOUT 120)
endif()
