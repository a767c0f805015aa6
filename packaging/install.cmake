# Install rules of the C++ package, included by kiln/CMakeLists.txt once the
# library targets exist.
include(CMakePackageConfigHelpers)

install(TARGETS ${KILN_TARGETS} EXPORT kilnTargets
  ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR}
  LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR})
# The public headers are kiln's own tree (kiln/kiln.h includes the API);
# the backends' and the sources' private headers come along because public
# ones include a few of them.
install(DIRECTORY ${PROJECT_SOURCE_DIR}/kiln/
  DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/kiln
  FILES_MATCHING PATTERN "*.h" PATTERN "*.cuh")
install(FILES ${PROJECT_BINARY_DIR}/include/kiln/config.h
  DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/kiln)

set(KILN_CMAKE_DIR ${CMAKE_INSTALL_LIBDIR}/cmake/kiln)
install(EXPORT kilnTargets NAMESPACE kiln:: DESTINATION ${KILN_CMAKE_DIR})
configure_package_config_file(${PROJECT_SOURCE_DIR}/packaging/kilnConfig.cmake.in
  ${PROJECT_BINARY_DIR}/kilnConfig.cmake INSTALL_DESTINATION ${KILN_CMAKE_DIR})
write_basic_package_version_file(${PROJECT_BINARY_DIR}/kilnConfigVersion.cmake
  VERSION ${PROJECT_VERSION} COMPATIBILITY SameMinorVersion)
install(FILES ${PROJECT_BINARY_DIR}/kilnConfig.cmake
  ${PROJECT_BINARY_DIR}/kilnConfigVersion.cmake DESTINATION ${KILN_CMAKE_DIR})

# pkg-config: the libraries in link order, then what they need (the
# libraries are static, so their dependencies are the user's to link).
set(KILN_PC_LIBS "-lkiln")
if(KILN_BUILD_CUDA)
  string(APPEND KILN_PC_LIBS " -lkiln_cuda -lkiln")
endif()
set(KILN_PC_DEPS "")
foreach(lib ${BLAS_LIBRARIES} ${LAPACKE_LIBRARY} ${MVEC_LIBRARY})
  if(lib)
    string(APPEND KILN_PC_DEPS " ${lib}")
  endif()
endforeach()
string(APPEND KILN_PC_DEPS " -lpthread")
foreach(lib ${CMAKE_DL_LIBS})
  string(APPEND KILN_PC_DEPS " -l${lib}")
endforeach()
# The JIT build loads the toolkit at run time; the AOT build links it.
if(KILN_BUILD_CUDA AND NOT KILN_CUDA_JIT)
  string(APPEND KILN_PC_DEPS
    " -L${CUDAToolkit_LIBRARY_DIR} -lcudart -lcublasLt -lnvrtc")
endif()
configure_file(${PROJECT_SOURCE_DIR}/packaging/kiln.pc.in
  ${PROJECT_BINARY_DIR}/kiln.pc @ONLY)
install(FILES ${PROJECT_BINARY_DIR}/kiln.pc
  DESTINATION ${CMAKE_INSTALL_LIBDIR}/pkgconfig)
