# Runs gpu_workload with fake_injection_probe injected the way the CUDA driver
# would (CUDA_INJECTION64_PATH) and compares what the probe collected through the
# fake libcupti with the workload's own expectations.
# Usage: cmake -DWORKLOAD=... -DPROBE=... -DCUPTI=... -DDIR=... -DSCENARIOS=a,b -P check_probe.cmake
string(REPLACE "," ";" SCENARIOS "${SCENARIOS}")
set(expect_file ${DIR}/probe.expect.json)
set(probe_file ${DIR}/probe.out.json)
file(REMOVE ${probe_file})
execute_process(
  COMMAND ${CMAKE_COMMAND} -E env CUDA_INJECTION64_PATH=${PROBE} TORCHPROF_CUPTI_LIB=${CUPTI}
          FAKE_PROBE_OUT=${probe_file} ${WORKLOAD} --expect ${expect_file} ${SCENARIOS}
  RESULT_VARIABLE rc)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "gpu_workload failed: ${rc}")
endif()
file(READ ${expect_file} expect)
file(READ ${probe_file} probe)
string(JSON expected_kernels LENGTH "${expect}" kernels)
string(JSON expected_gpu_ns GET "${expect}" totals gpu_ns)
string(JSON expected_dropped GET "${expect}" dropped)
string(JSON kernels GET "${probe}" kernels)
string(JSON gpu_ns GET "${probe}" gpu_ns)
string(JSON dropped GET "${probe}" dropped)
string(JSON uncorrelated GET "${probe}" uncorrelated)
if(NOT kernels EQUAL expected_kernels OR NOT gpu_ns EQUAL expected_gpu_ns OR NOT dropped EQUAL expected_dropped
   OR NOT uncorrelated EQUAL 0)
  message(FATAL_ERROR "probe saw kernels=${kernels} gpu_ns=${gpu_ns} dropped=${dropped} uncorrelated=${uncorrelated}; "
                      "expected kernels=${expected_kernels} gpu_ns=${expected_gpu_ns} dropped=${expected_dropped}")
endif()
message(STATUS "probe: ${kernels} kernels, ${gpu_ns} ns of GPU work, ${dropped} dropped, as expected")
