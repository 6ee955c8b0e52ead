# zps_process: child processes (spawn, wait with deadlines, terminate) for `zps launch` and the
# integration-test fixture. Included from tools/CMakeLists.txt.
add_library(zps_process STATIC ${CMAKE_CURRENT_LIST_DIR}/process.cc)
target_link_libraries(zps_process PUBLIC zps_common)

# zps_launch: `zps launch` (launchMain), linked into the zps binary.
add_library(zps_launch STATIC ${CMAKE_CURRENT_LIST_DIR}/launch.cc ${CMAKE_CURRENT_LIST_DIR}/launch_args.cc
            ${CMAKE_CURRENT_LIST_DIR}/launch_checks.cc ${CMAKE_CURRENT_LIST_DIR}/launch_children.cc
            ${CMAKE_CURRENT_LIST_DIR}/launch_job_status.cc
            ${CMAKE_CURRENT_LIST_DIR}/launch_output.cc ${CMAKE_CURRENT_LIST_DIR}/launch_signals.cc
            ${CMAKE_CURRENT_LIST_DIR}/launch_python.cc)
# zps_ps: httpGet, to read the scheduler's one-line job summary for the live status line.
target_link_libraries(zps_launch PUBLIC zps_process zps_ps)
