# ZPS_WITH_CUDA=AUTO builds the CUDA parts when nvcc is found; ON requires it; OFF never builds them.
set(ZPS_CUDA_ENABLED OFF)
if(NOT ZPS_WITH_CUDA STREQUAL "OFF")
  if(NOT CMAKE_CUDA_COMPILER AND EXISTS /usr/local/cuda/bin/nvcc)
    set(CMAKE_CUDA_COMPILER /usr/local/cuda/bin/nvcc)
  endif()
  include(CheckLanguage)
  check_language(CUDA)
  if(CMAKE_CUDA_COMPILER)
    # The datacenter GPUs in use natively: 80 A100/A30, 86 A10/A40, 89 L4/L40S, 90 H100/H200, plus
    # compute_90 PTX that newer chips JIT-compile. A GPU with none of these gets no kernels, and zps
    # falls back to the CPU. -DCMAKE_CUDA_ARCHITECTURES=... (or the CUDAARCHS environment variable)
    # overrides it, e.g. "90-real" alone for a faster build for H100s only (docs/gpus.md).
    if(NOT DEFINED CMAKE_CUDA_ARCHITECTURES AND NOT DEFINED ENV{CUDAARCHS})
      set(CMAKE_CUDA_ARCHITECTURES "80-real;86-real;89-real;90-real;90-virtual")
    endif()
    enable_language(CUDA)
    find_package(CUDAToolkit REQUIRED)
    set(ZPS_CUDA_ENABLED ON)
  elseif(ZPS_WITH_CUDA STREQUAL "ON")
    message(FATAL_ERROR "ZPS_WITH_CUDA=ON but no nvcc was found: install the CUDA Toolkit or use -DZPS_WITH_CUDA=AUTO|OFF")
  endif()
endif()
message(STATUS "zps: CUDA parts ${ZPS_CUDA_ENABLED} (ZPS_WITH_CUDA=${ZPS_WITH_CUDA})")
