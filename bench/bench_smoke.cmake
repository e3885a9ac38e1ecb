# bench-smoke (ctest label `bench-smoke`, part of the default test run):
# every benchmark program of bench/ runs once with the smallest arguments
# it accepts and must exit 0 and print a JSON object on stdout
# (bench/smoke_check.py), in seconds each. It catches benchmarks that no
# longer start (e.g. fetch_bench's cache no longer matching its spec); it
# measures nothing. A new *_bench.cc or *.py in bench/ must get an entry
# below (or a reason in LOFT_BENCH_SMOKE_EXCLUDED): configuring fails
# otherwise. Run: cd build && ctest -L bench-smoke
find_package(Python3 COMPONENTS Interpreter)
if(NOT Python3_Interpreter_FOUND)
  message(WARNING "bench-smoke tests need python3; not added")
  return()
endif()

set(_smoke ${Python3_EXECUTABLE} ${CMAKE_CURRENT_LIST_DIR}/smoke_check.py)
set(_bin ${CMAKE_BINARY_DIR}/bin)
# name -> smallest arguments.
set(LOFT_BENCH_SMOKE_cache_bench --samples-per-round 64 --rounds 1)
set(LOFT_BENCH_SMOKE_epoch_quality_bench --instances 1 --max-workers 8)
set(LOFT_BENCH_SMOKE_fetch_bench 2000 0.2)
set(LOFT_BENCH_SMOKE_learning_per_step_bench --spec ${CMAKE_SOURCE_DIR}/examples/clusters/edge-bandwidth.yaml
    --csv ${CMAKE_CURRENT_LIST_DIR}/learning_per_step_smoke.csv --policies loft,lbbsp --steps 2 --eval-every 1 --seeds 1
    --test-samples 100 --period 2 --local-scale batch)
set(LOFT_BENCH_SMOKE_planner_bench --instances 1 --reps 1 --max-workers 16)
set(LOFT_BENCH_SMOKE_preprocess_bench --images 16 --rounds 1 --threads 1)
set(LOFT_BENCH_SMOKE_ring_compress_bench --members 3 --rounds 1 --block 1 --batch 1)
set(LOFT_BENCH_SMOKE_ring_verify_bench --members 3 --tolerance 1 --batch 1 --rounds 1 --block 1)
set(LOFT_BENCH_SMOKE_sched_overhead_bench --iterations 2 --nosync)
set(LOFT_BENCH_SMOKE_sim_bench ${CMAKE_SOURCE_DIR}/examples/clusters/homogeneous.yaml 5)
set(LOFT_BENCH_SMOKE_state_bench --reps 1 --max-nodes 16 --epoch-factor 1)
set(LOFT_BENCH_SMOKE_train_bench --skip-train --skip-allreduce)
# Python benchmarks: name -> smoke_check options, then -- and the command.
# The torch bench runs on Debian's python3 (python3-torch), as the torch
# integration tests do (tests/integration/torch.cmake).
set(_loft_torch_py ${Python3_EXECUTABLE})
if(EXISTS /usr/bin/python3)
  set(_loft_torch_py /usr/bin/python3)
endif()
set(LOFT_BENCH_SMOKE_PY_torch_consumer_bench
    --needs-module torch -- ${_loft_torch_py} ${CMAKE_CURRENT_LIST_DIR}/torch_consumer_bench.py
    --build ${CMAKE_BINARY_DIR} --batch 512 --iterations 2 --trials 1 --skip-allreduce)
# Not smoke-tested, with the reason.
set(LOFT_BENCH_SMOKE_EXCLUDED
    "time_to_accuracy.py: trains real models to a target accuracy (minutes at least)"
    "chunk_garbage_run.py: trains six real agents for 360 steps twice (minutes); its short form is integration:eviction"
    "fidelity.py: testbed runs (network namespaces); its --quick run is bench:fidelity_quick"
    "fidelity_spec_test.py: a test of fidelity.py's spec edits (ctest bench:fidelity_spec), not a benchmark"
    "fidelity_repeat.py: reads fidelity.py's results of earlier runs; its test is bench:fidelity_repeat"
    "fidelity_repeat_test.py: the test of fidelity_repeat.py (ctest bench:fidelity_repeat), not a benchmark"
    "smoke_check.py: this checker")

file(GLOB _cc RELATIVE ${CMAKE_CURRENT_LIST_DIR} ${CMAKE_CURRENT_LIST_DIR}/*_bench.cc)
file(GLOB _py RELATIVE ${CMAKE_CURRENT_LIST_DIR} ${CMAKE_CURRENT_LIST_DIR}/*.py)
foreach(f ${_cc} ${_py})
  string(REGEX REPLACE "\\.(cc|py)$" "" name ${f})
  set(_excluded ${LOFT_BENCH_SMOKE_EXCLUDED})
  list(FILTER _excluded INCLUDE REGEX "^${f}:")
  if(_excluded)
    continue()
  endif()
  if(f MATCHES "\\.cc$" AND DEFINED LOFT_BENCH_SMOKE_${name})
    if(TARGET ${name})
      add_test(NAME bench-smoke:${name} COMMAND ${_smoke} -- ${_bin}/${name} ${LOFT_BENCH_SMOKE_${name}})
    endif()
  elseif(f MATCHES "\\.py$" AND DEFINED LOFT_BENCH_SMOKE_PY_${name})
    add_test(NAME bench-smoke:${name} COMMAND ${_smoke} ${LOFT_BENCH_SMOKE_PY_${name}})
  else()
    message(FATAL_ERROR "bench/${f} has no bench-smoke entry: add its smallest arguments to "
                        "bench/bench_smoke.cmake (or a reason to LOFT_BENCH_SMOKE_EXCLUDED)")
  endif()
  if(TEST bench-smoke:${name})
    set_tests_properties(bench-smoke:${name} PROPERTIES LABELS "bench-smoke" TIMEOUT 180
                         SKIP_RETURN_CODE 77 ENVIRONMENT "PYTHONDONTWRITEBYTECODE=1")
  endif()
endforeach()
