# The CUDA backend's build, the kiln_cuda library: toolkit libraries, the
# embedded device headers for NVRTC, and (unless KILN_CUDA_JIT) the
# nvcc-compiled kernels.
find_package(CUDAToolkit 12.8 REQUIRED)
if(NOT KILN_CUDA_JIT)
  enable_language(CUDA)
  # sm_90 machine code for Hopper, plus compute_90 PTX that newer GPUs JIT.
  # The target exists already, so its property is set, not the default.
  if(NOT KILN_CUDA_ARCHITECTURES)
    set(KILN_CUDA_ARCHITECTURES 90-real 90-virtual)
  endif()
  set_property(TARGET kiln_cuda PROPERTY CUDA_ARCHITECTURES
    ${KILN_CUDA_ARCHITECTURES})
  set_property(TARGET kiln_cuda PROPERTY CUDA_STANDARD 17)
  set_property(TARGET kiln_cuda PROPERTY CUDA_SEPARABLE_COMPILATION OFF)
  target_compile_options(kiln_cuda PRIVATE
    $<$<COMPILE_LANGUAGE:CUDA>:--expt-relaxed-constexpr -Xcompiler=-fPIC>)
endif()
# The driver API is reached through cudart (utils.h, DriverApi), not linked:
# the library then loads on machines without a GPU driver, where
# gpu::is_available() is simply false.
target_link_libraries(kiln_cuda PUBLIC CUDA::cudart CUDA::cublasLt CUDA::nvrtc)

# Device headers become raw-string sources, generated from the same glob as
# their include names, so NVRTC compiles the very bytes nvcc includes.
set(KILN_CUDA_DIR ${CMAKE_CURRENT_SOURCE_DIR}/backend/cuda)
file(GLOB KILN_DEVICE_HEADERS CONFIGURE_DEPENDS ${KILN_CUDA_DIR}/device/*.cuh)
set(KILN_DEVICE_EMBEDDED ${PROJECT_BINARY_DIR}/kiln_cuda_device_sources.cpp)
string(REPLACE ";" ":" KILN_DEVICE_HEADER_LIST "${KILN_DEVICE_HEADERS}")
add_custom_command(OUTPUT ${KILN_DEVICE_EMBEDDED}
  COMMAND ${CMAKE_COMMAND} -DOUT=${KILN_DEVICE_EMBEDDED}
    "-DHEADERS=${KILN_DEVICE_HEADER_LIST}" -DROOT=${PROJECT_SOURCE_DIR}
    -P ${KILN_CUDA_DIR}/embed_device.cmake
  DEPENDS ${KILN_DEVICE_HEADERS} ${KILN_CUDA_DIR}/embed_device.cmake
  VERBATIM)
target_sources(kiln_cuda PRIVATE ${KILN_DEVICE_EMBEDDED})
# NVRTC has no default include path: it needs the toolkit's headers (and
# CCCL's libcu++ under include/cccl) at run time.
# The list may also hold include/cccl: keep the first entry.
list(GET CUDAToolkit_INCLUDE_DIRS 0 KILN_CUDA_INCLUDE_DIR)
target_compile_definitions(kiln_cuda PRIVATE
  KILN_CUDA_INCLUDE_DIR="${KILN_CUDA_INCLUDE_DIR}")
