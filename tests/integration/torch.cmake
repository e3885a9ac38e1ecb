# PyTorch on loft: real loft-scheduler + loft-agents in
# compute_mode external (spec training.model external) with one
# examples/pytorch/train_fmnist.py trainer per agent, run by Debian's
# /usr/bin/python3 with python3-torch (scripts/install-deps.sh). Skipped
# (code 77) when torch is not importable there.
set(LOFT_TORCH_PY /usr/bin/python3)
if(EXISTS ${LOFT_TORCH_PY} AND TARGET loft-agent AND TARGET loft-scheduler AND TARGET loft_python)
  set(LOFT_TORCH_ENV "LOFT_BIN_DIR=${CMAKE_BINARY_DIR}/bin;LOFT_SOURCE_DIR=${CMAKE_SOURCE_DIR};LOFT_PYTHONPATH=${CMAKE_BINARY_DIR}/python;LOFT_IT_DIR=${CMAKE_CURRENT_SOURCE_DIR};PYTHONDONTWRITEBYTECODE=1;OMP_NUM_THREADS=1")
  foreach(t exactness accuracy byzantine restart exchange)
    add_test(NAME integration:torch_${t}
             COMMAND sh -c "${LOFT_TORCH_PY} -c 'import torch' 2>/dev/null || { echo 'python3-torch missing: skipped'; exit 77; }; exec ${LOFT_TORCH_PY} ${CMAKE_CURRENT_SOURCE_DIR}/torch_${t}_test.py")
    set_tests_properties(integration:torch_${t} PROPERTIES
      LABELS integration TIMEOUT 900 RUN_SERIAL ON SKIP_RETURN_CODE 77 ENVIRONMENT "${LOFT_TORCH_ENV}")
  endforeach()
  add_test(NAME integration:torch_install
           COMMAND sh -c "${LOFT_TORCH_PY} -c 'import torch' 2>/dev/null || { echo 'python3-torch missing: skipped'; exit 77; }; exec sh ${CMAKE_CURRENT_SOURCE_DIR}/python_install_test.sh ${CMAKE_BINARY_DIR} ${CMAKE_CURRENT_BINARY_DIR}/python-install-test ${CMAKE_SOURCE_DIR} ${LOFT_TORCH_PY}")
  set_tests_properties(integration:torch_install PROPERTIES LABELS integration TIMEOUT 300 SKIP_RETURN_CODE 77)
endif()
