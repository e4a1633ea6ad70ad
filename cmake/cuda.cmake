# MAPD_WITH_CUDA=auto|on|off decides whether the CUDA/NCCL parts are built.
#   auto: build them where the CUDA toolkit (and NCCL) is found, skip them otherwise.
#   on:   require them (configure fails without the toolkit or NCCL).
#   off:  never build them.
# Sets MAPD_CUDA_ENABLED (ON/OFF) and, when ON, the imported target mapd::nccl.
set(MAPD_CUDA_ENABLED OFF)
string(TOLOWER "${MAPD_WITH_CUDA}" _mapd_cuda_mode)
if(NOT _mapd_cuda_mode MATCHES "^(auto|on|off)$")
  message(FATAL_ERROR "MAPD_WITH_CUDA must be auto, on or off (got '${MAPD_WITH_CUDA}')")
endif()

if(NOT _mapd_cuda_mode STREQUAL "off")
  find_package(CUDAToolkit QUIET)
  set(_nccl_hint "")
  if(CUDAToolkit_FOUND)
    set(_nccl_hint "${CUDAToolkit_LIBRARY_ROOT}" "${CUDAToolkit_TARGET_DIR}")
  endif()
  # MAPD_NCCL_ROOT (environment): an NCCL outside the toolkit, e.g. PyTorch's wheel
  # (site-packages/nvidia/nccl, whose library is libnccl.so.2 alone).
  find_path(NCCL_INCLUDE_DIR nccl.h HINTS $ENV{MAPD_NCCL_ROOT} ${CUDAToolkit_INCLUDE_DIRS} PATHS ${_nccl_hint} /usr/local/cuda
            PATH_SUFFIXES include)
  find_library(NCCL_LIBRARY NAMES nccl libnccl.so.2 HINTS $ENV{MAPD_NCCL_ROOT} ${CUDAToolkit_LIBRARY_DIR}
               PATHS ${_nccl_hint} /usr/local/cuda PATH_SUFFIXES lib64 lib)
  if(CUDAToolkit_FOUND AND NCCL_INCLUDE_DIR AND NCCL_LIBRARY)
    set(MAPD_CUDA_ENABLED ON)
    add_library(mapd::nccl UNKNOWN IMPORTED)
    set_target_properties(mapd::nccl PROPERTIES IMPORTED_LOCATION "${NCCL_LIBRARY}"
                          INTERFACE_INCLUDE_DIRECTORIES "${NCCL_INCLUDE_DIR}")
    message(STATUS "MAP: CUDA ${CUDAToolkit_VERSION} (${CUDAToolkit_BIN_DIR}), NCCL ${NCCL_LIBRARY}")
  elseif(_mapd_cuda_mode STREQUAL "on")
    message(FATAL_ERROR "MAPD_WITH_CUDA=on but the CUDA toolkit or NCCL was not found "
                        "(toolkit found: ${CUDAToolkit_FOUND}, nccl.h: ${NCCL_INCLUDE_DIR}, "
                        "libnccl: ${NCCL_LIBRARY}). Install them or use -DMAPD_WITH_CUDA=auto|off.")
  else()
    message(STATUS "MAP: CUDA toolkit or NCCL not found; building without the CUDA/NCCL parts")
  endif()
endif()
