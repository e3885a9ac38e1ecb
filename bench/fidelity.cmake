# bench/fidelity.py: real testbed runs vs the calibrated
# simulator. The ctest entry is its --quick smoke test; without root or
# the testbed's kernel features it prints why and exits 77 (skipped).
find_package(Python3 COMPONENTS Interpreter)
if(Python3_Interpreter_FOUND AND TARGET loftctl AND TARGET loft-sim AND TARGET loft-agent AND TARGET loft-scheduler)
  add_test(NAME bench:fidelity_quick
           COMMAND ${Python3_EXECUTABLE} ${CMAKE_CURRENT_SOURCE_DIR}/fidelity.py --bin ${CMAKE_BINARY_DIR}/bin --quick)
  set_tests_properties(bench:fidelity_quick PROPERTIES
    LABELS "bench;testbed" TIMEOUT 600 RUN_SERIAL ON SKIP_RETURN_CODE 77
    ENVIRONMENT "PYTHONDONTWRITEBYTECODE=1")
endif()
if(Python3_Interpreter_FOUND AND TARGET loft-sim)
  add_test(NAME bench:fidelity_spec
           COMMAND ${Python3_EXECUTABLE} ${CMAKE_CURRENT_SOURCE_DIR}/fidelity_spec_test.py ${CMAKE_BINARY_DIR}/bin)
  set_tests_properties(bench:fidelity_spec PROPERTIES LABELS bench TIMEOUT 120 ENVIRONMENT "PYTHONDONTWRITEBYTECODE=1")
endif()
if(Python3_Interpreter_FOUND)
  add_test(NAME bench:fidelity_repeat
           COMMAND ${Python3_EXECUTABLE} ${CMAKE_CURRENT_SOURCE_DIR}/fidelity_repeat_test.py)
  set_tests_properties(bench:fidelity_repeat PROPERTIES LABELS bench TIMEOUT 60 ENVIRONMENT "PYTHONDONTWRITEBYTECODE=1")
endif()
