# `cmake --install` puts the binary, a shared worker library with the public headers, and a CMake
# package, so a user's project can do:
#   find_package(zps REQUIRED)
#   target_link_libraries(my_trainer PRIVATE zps::zps)
# The shared library bundles the core (ZeroMQ, protobuf and glog stay private to it), and the public
# headers include only the standard library.
add_library(zps_lib SHARED ${PROJECT_SOURCE_DIR}/worker/library_anchor.cc)
set_target_properties(zps_lib PROPERTIES OUTPUT_NAME zps EXPORT_NAME zps VERSION ${PROJECT_VERSION} SOVERSION ${PROJECT_VERSION_MAJOR})
target_link_libraries(zps_lib PRIVATE "$<LINK_LIBRARY:WHOLE_ARCHIVE,zps_worker>" zps_ps)
target_include_directories(zps_lib PUBLIC
  $<BUILD_INTERFACE:${PROJECT_SOURCE_DIR}/include>
  $<INSTALL_INTERFACE:${CMAKE_INSTALL_INCLUDEDIR}>)
target_compile_features(zps_lib INTERFACE cxx_std_20)
add_library(zps::zps ALIAS zps_lib)

include(CMakePackageConfigHelpers)
install(TARGETS zps RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
install(TARGETS zps_lib EXPORT zpsTargets
  LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR}
  INCLUDES DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
install(FILES include/zps/status.h include/zps/dtype.h include/zps/worker.h include/zps/compression.h
  DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/zps)
install(EXPORT zpsTargets NAMESPACE zps:: DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/zps)
configure_package_config_file(${PROJECT_SOURCE_DIR}/cmake/zpsConfig.cmake.in
  ${CMAKE_BINARY_DIR}/zpsConfig.cmake INSTALL_DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/zps
  PATH_VARS CMAKE_INSTALL_BINDIR)
write_basic_package_version_file(${CMAKE_BINARY_DIR}/zpsConfigVersion.cmake COMPATIBILITY SameMajorVersion)
install(FILES ${CMAKE_BINARY_DIR}/zpsConfig.cmake ${CMAKE_BINARY_DIR}/zpsConfigVersion.cmake
  DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/zps)

# The C API for C programs and other bindings (the Python package installs its own copy beside itself).
install(TARGETS zps_c LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR})
install(FILES include/zps/c_api.h DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/zps)
