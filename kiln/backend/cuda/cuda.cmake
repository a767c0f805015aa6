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
# gpu::is_available() is simply false. The JIT build links none of the
# toolkit either: cudart, cuBLASLt and NVRTC are loaded at run time
# (toolkit_symbols.cpp), from NVIDIA's wheels or the toolkit, so a wheel
# holding it installs and runs on the CPU without them. The AOT build's
# nvcc-compiled kernels register with cudart, so it links them.
if(KILN_CUDA_JIT)
  target_include_directories(kiln_cuda SYSTEM PRIVATE
    ${CUDAToolkit_INCLUDE_DIRS})
  target_link_libraries(kiln_cuda PRIVATE ${CMAKE_DL_LIBS})
else()
  target_link_libraries(kiln_cuda PUBLIC CUDA::cudart CUDA::cublasLt
    CUDA::nvrtc)
endif()

# Device headers become raw-string sources, generated from the same glob as
# their include names, so NVRTC compiles the very bytes nvcc includes.
set(KILN_CUDA_DIR ${CMAKE_CURRENT_SOURCE_DIR}/backend/cuda)
# The elementwise tables and their vocabulary are device headers too.
file(GLOB KILN_DEVICE_HEADERS CONFIGURE_DEPENDS ${KILN_CUDA_DIR}/device/*.cuh)
list(APPEND KILN_DEVICE_HEADERS
  ${CMAKE_CURRENT_SOURCE_DIR}/primitives/unary_table.h
  ${CMAKE_CURRENT_SOURCE_DIR}/primitives/binary_table.h
  ${CMAKE_CURRENT_SOURCE_DIR}/backend/common/functor_math.h
  ${CMAKE_CURRENT_SOURCE_DIR}/backend/common/libm_table.h)
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
# cuFFT, cuSOLVER and cuBLAS are loaded at run time (toolkit_library.cpp);
# where the loader's path lacks them, they are looked for in the toolkit's
# library directory. Their headers come from the toolkit.
set_property(SOURCE ${KILN_CUDA_DIR}/toolkit_library.cpp APPEND
  PROPERTY COMPILE_DEFINITIONS
  KILN_CUDA_LIBRARY_DIR="${CUDAToolkit_LIBRARY_DIR}"
  KILN_CUDA_MAJOR="${CUDAToolkit_VERSION_MAJOR}")

# cuDNN's fused attention and convolutions through cudnn-frontend
# (header-only) with cuDNN loaded at run time (dlopen), so neither is a link
# dependency and the library runs without cuDNN (cudnn_attention.cpp and
# cudnn_conv.cpp then answer "not here").
# The headers come from KILN_CUDNN_FRONTEND_INCLUDE, the include path, or
# the nvidia-cudnn-frontend wheel (scripts/setup installs it into .venv);
# cuDNN's own headers from the toolkit, the include path or the
# nvidia-cudnn wheel. KILN_CUDNN=OFF builds without it.
option(KILN_CUDNN
  "Use cuDNN's attention and convolution engines when cuDNN is present" ON)
if(KILN_CUDNN)
  set(kiln_site_dirs)
  file(GLOB kiln_venv_sites ${PROJECT_SOURCE_DIR}/.venv/lib/python3*/site-packages)
  list(APPEND kiln_site_dirs ${kiln_venv_sites})
  if(Python_EXECUTABLE)
    execute_process(COMMAND ${Python_EXECUTABLE} -c
      "import sysconfig; print(sysconfig.get_paths()['purelib'])"
      OUTPUT_VARIABLE kiln_python_site OUTPUT_STRIP_TRAILING_WHITESPACE
      ERROR_QUIET)
    list(APPEND kiln_site_dirs ${kiln_python_site})
  endif()
  set(kiln_frontend_hints)
  set(kiln_cudnn_hints ${CUDAToolkit_INCLUDE_DIRS})
  foreach(site ${kiln_site_dirs})
    list(APPEND kiln_frontend_hints ${site}/include)
    list(APPEND kiln_cudnn_hints ${site}/nvidia/cudnn/include)
  endforeach()
  find_path(KILN_CUDNN_FRONTEND_INCLUDE cudnn_frontend.h
    HINTS ${kiln_frontend_hints})
  find_path(KILN_CUDNN_INCLUDE cudnn.h HINTS ${kiln_cudnn_hints})
  if(KILN_CUDNN_FRONTEND_INCLUDE AND KILN_CUDNN_INCLUDE)
    message(STATUS "kiln: cuDNN attention and convolution with "
      "cudnn-frontend from ${KILN_CUDNN_FRONTEND_INCLUDE}, cuDNN headers from "
      "${KILN_CUDNN_INCLUDE}")
    set(kiln_cudnn_sources ${KILN_CUDA_DIR}/cudnn_graphs.cpp
      ${KILN_CUDA_DIR}/cudnn_attention.cpp ${KILN_CUDA_DIR}/cudnn_conv.cpp)
    set_property(SOURCE ${kiln_cudnn_sources} APPEND PROPERTY
      COMPILE_DEFINITIONS KILN_HAS_CUDNN_FRONTEND=1
      NV_CUDNN_FRONTEND_USE_DYNAMIC_LOADING CUDNN_FRONTEND_SKIP_JSON_LIB)
    # System directories (their warnings are not ours), cuDNN's first.
    # -Os: the frontend's graph code runs once per new shape, and most of
    # these files' size is that code (attention's: 1.34 MB of text at -O3,
    # 0.85 at -Os).
    set_property(SOURCE ${kiln_cudnn_sources} APPEND PROPERTY
      COMPILE_OPTIONS -isystem ${KILN_CUDNN_INCLUDE}
      -isystem ${KILN_CUDNN_FRONTEND_INCLUDE} -Os)
    target_link_libraries(kiln_cuda PRIVATE ${CMAKE_DL_LIBS})
  else()
    message(STATUS "kiln: no cudnn-frontend/cuDNN headers; attention and "
      "convolution use kiln's own kernels only")
  endif()
endif()
