# fsdpc as a library other projects build against: one static library,
# libfsdpc.a (target fsdpc::fsdpc), archived from the objects of the
# per-folder libraries (nothing is compiled twice; the one-way folder
# libraries stay as they are for the rest of the build), the headers of the
# public API, a CMake package, a pkg-config file, and a .deb through CPack.
#
#   cmake --install build --prefix P
#   find_package(fsdpc CONFIG REQUIRED)   # with -DCMAKE_PREFIX_PATH=P
#   target_link_libraries(app PRIVATE fsdpc::fsdpc)
include(GNUInstallDirs)
include(CMakePackageConfigHelpers)

# Imported targets are scoped to the folder that found them; these finds hit
# the cache that executors/ filled.
find_package(MPI REQUIRED COMPONENTS CXX)
find_package(OpenMP REQUIRED COMPONENTS CXX)
find_package(OpenSSL REQUIRED COMPONENTS Crypto)

# One archive, so users (and pkg-config) link one library, and the
# executors <-> cuda cycle stays inside it.
set(fsdpc_parts fsdpc_ir fsdpc_passes fsdpc_executors fsdpc_runtime fsdpc_frontend fsdpc_tokenizer)
if(FSDPC_HAVE_CUDA)
  list(APPEND fsdpc_parts fsdpc_cuda)
endif()
add_library(fsdpc_lib STATIC)
foreach(part ${fsdpc_parts})
  target_sources(fsdpc_lib PRIVATE $<TARGET_OBJECTS:${part}>)
endforeach()
# LINKER_LANGUAGE CXX: the CUDA objects need only libcudart, which is linked
# by name, so consumers need not enable CUDA.
set_target_properties(fsdpc_lib PROPERTIES OUTPUT_NAME fsdpc EXPORT_NAME fsdpc LINKER_LANGUAGE CXX)
add_library(fsdpc::fsdpc ALIAS fsdpc_lib)
# Sources include "frontend/jit.h", "ir/trace.h"...: the installed headers
# keep that layout under include/fsdpc.
target_include_directories(fsdpc_lib INTERFACE
  $<BUILD_INTERFACE:${PROJECT_SOURCE_DIR}>
  $<INSTALL_INTERFACE:${CMAKE_INSTALL_INCLUDEDIR}/fsdpc>)
target_compile_features(fsdpc_lib INTERFACE cxx_std_20)
# No installed header includes mpi.h (test/consumer/install_examples.cmake
# checks), but every user of the archive links MPI: public, as its package
# is found again there. The rest is needed only to link (hence PRIVATE:
# $<LINK_ONLY> for the archive's users). Libraries found by path are
# wrapped in imported targets that fsdpcConfig.cmake defines again on the
# user's machine. nlohmann_json is header-only and private: not needed.
function(fsdpc_import_library name)
  add_library(fsdpc::${name} INTERFACE IMPORTED)
  set_target_properties(fsdpc::${name} PROPERTIES INTERFACE_LINK_LIBRARIES "${ARGN}")
endfunction()
fsdpc_import_library(dnnl ${FSDPC_DNNL_LIBRARY})
fsdpc_import_library(openmp ${OpenMP_CXX_LIBRARIES})  # the runtime only: no -fopenmp for users
fsdpc_import_library(llvm ${FSDPC_LLVM_LIBRARY})  # the CPU fusion executor's JIT (shared libLLVM)
# The tokenizers' PCRE2, libsentencepiece and utf8proc, found by
# tokenizer/CMakeLists.txt through pkg-config (the full paths of the libraries).
find_library(FSDPC_PCRE2_LIBRARY NAMES pcre2-8 HINTS ${FSDPC_PCRE2_LIBRARY_DIRS})
find_library(FSDPC_SENTENCEPIECE_LIBRARY NAMES sentencepiece HINTS ${FSDPC_SENTENCEPIECE_LIBRARY_DIRS})
find_library(FSDPC_UTF8PROC_LIBRARY NAMES utf8proc HINTS ${FSDPC_UTF8PROC_LIBRARY_DIRS})
fsdpc_import_library(pcre2 ${FSDPC_PCRE2_LIBRARY})
fsdpc_import_library(sentencepiece ${FSDPC_SENTENCEPIECE_LIBRARY})
fsdpc_import_library(utf8proc ${FSDPC_UTF8PROC_LIBRARY})
target_link_libraries(fsdpc_lib PUBLIC MPI::MPI_CXX PRIVATE fsdpc::dnnl fsdpc::openmp fsdpc::llvm OpenSSL::Crypto
                      fsdpc::pcre2 fsdpc::sentencepiece fsdpc::utf8proc)
set(fsdpc_pc_libs ${FSDPC_DNNL_LIBRARY} ${OpenMP_CXX_LIBRARIES} ${FSDPC_LLVM_LIBRARY} ${OPENSSL_CRYPTO_LIBRARY}
    ${FSDPC_PCRE2_LIBRARY} ${FSDPC_SENTENCEPIECE_LIBRARY} ${FSDPC_UTF8PROC_LIBRARY})
if(FSDPC_HAVE_CUDA)
  fsdpc_import_library(nccl ${FSDPC_NCCL_LIBRARY})
  # NVRTC: the CUDA fusion executor compiles its regions at run time.
  target_link_libraries(fsdpc_lib PRIVATE CUDA::cudart CUDA::cublas CUDA::cublasLt CUDA::nvrtc fsdpc::nccl)
  list(APPEND fsdpc_pc_libs ${CUDA_cudart_LIBRARY} ${CUDA_cublas_LIBRARY} ${CUDA_cublasLt_LIBRARY}
       ${CUDA_nvrtc_LIBRARY} ${FSDPC_NCCL_LIBRARY})
endif()

set(fsdpc_cmake_dir ${CMAKE_INSTALL_LIBDIR}/cmake/fsdpc)
install(TARGETS fsdpc_lib EXPORT fsdpcTargets ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR})
# A static archive is never stripped by CMake (its symbols are its index),
# but its debug sections can be: `cmake --install --strip` and CPack do.
if(CMAKE_STRIP)
  install(CODE "
    if(CMAKE_INSTALL_DO_STRIP)
      execute_process(COMMAND \"${CMAKE_STRIP}\" --strip-debug
        \"\$ENV{DESTDIR}\${CMAKE_INSTALL_PREFIX}/${CMAKE_INSTALL_LIBDIR}/$<TARGET_FILE_NAME:fsdpc_lib>\"
        COMMAND_ERROR_IS_FATAL ANY)
    endif()")
endif()
# The public headers: frontend/jit.h and what the examples include, with
# everything they include in turn, found when installing.
install(CODE "
  set(FSDPC_SOURCE_DIR \"${PROJECT_SOURCE_DIR}\")
  set(FSDPC_HEADER_DESTINATION \"${CMAKE_INSTALL_INCLUDEDIR}/fsdpc\")
  include(\"${CMAKE_CURRENT_LIST_DIR}/install_headers.cmake\")")

install(EXPORT fsdpcTargets NAMESPACE fsdpc:: DESTINATION ${fsdpc_cmake_dir})
configure_package_config_file(${CMAKE_CURRENT_LIST_DIR}/fsdpcConfig.cmake.in
  ${PROJECT_BINARY_DIR}/fsdpcConfig.cmake INSTALL_DESTINATION ${fsdpc_cmake_dir})
write_basic_package_version_file(${PROJECT_BINARY_DIR}/fsdpcConfigVersion.cmake
  COMPATIBILITY SameMinorVersion)  # 0.x: a minor version may break the API
install(FILES ${PROJECT_BINARY_DIR}/fsdpcConfig.cmake ${PROJECT_BINARY_DIR}/fsdpcConfigVersion.cmake
        DESTINATION ${fsdpc_cmake_dir})

# pkg-config: relative to the .pc file, so the prefix can move; a static
# library's users link its dependencies too, hence all of them in Libs.
set(fsdpc_pc_link "")
set(fsdpc_pc_dirs "")
foreach(lib ${fsdpc_pc_libs})
  get_filename_component(dir ${lib} DIRECTORY)
  get_filename_component(name ${lib} NAME_WE)
  string(REGEX REPLACE "^lib" "" name ${name})
  if(NOT dir IN_LIST CMAKE_CXX_IMPLICIT_LINK_DIRECTORIES AND NOT dir IN_LIST fsdpc_pc_dirs)
    list(APPEND fsdpc_pc_dirs ${dir})
    string(APPEND fsdpc_pc_link " -L${dir}")
  endif()
  string(APPEND fsdpc_pc_link " -l${name}")
endforeach()
# An archive built with FSDPC_SANITIZE (cmake/sanitizers.cmake) needs the
# sanitizers' runtimes in whatever links it.
if(FSDPC_SANITIZE)
  target_link_options(fsdpc_lib INTERFACE ${fsdpc_sanitize_flags})
  string(APPEND fsdpc_pc_link " -fsanitize=address,undefined")
endif()
file(RELATIVE_PATH fsdpc_pc_to_prefix ${CMAKE_INSTALL_PREFIX}/${CMAKE_INSTALL_LIBDIR}/pkgconfig ${CMAKE_INSTALL_PREFIX})
string(REGEX REPLACE "/$" "" fsdpc_pc_to_prefix "${fsdpc_pc_to_prefix}")
configure_file(${CMAKE_CURRENT_LIST_DIR}/fsdpc.pc.in ${PROJECT_BINARY_DIR}/fsdpc.pc @ONLY)
install(FILES ${PROJECT_BINARY_DIR}/fsdpc.pc DESTINATION ${CMAKE_INSTALL_LIBDIR}/pkgconfig)

# cpack -G DEB: one package with the CLI, the library, headers and package
# files. Depends: the runtime packages of the libraries the installed binary
# loads (dpkg-shlibdeps: libdnnl, Open MPI, mimalloc, libgomp, libstdc++...);
# CUDA libraries not installed from packages are not listed (add them with
# -DCPACK_DEBIAN_PACKAGE_DEPENDS=...). Building against libfsdpc.a needs the
# -dev packages, hence Recommends.
set(CPACK_PACKAGE_NAME fsdpc)
set(CPACK_PACKAGE_VENDOR fsdpc)
set(CPACK_PACKAGE_DESCRIPTION_SUMMARY "Trace compiler for sharded (FSDP/ZeRO) data-parallel training")
if(NOT CPACK_PACKAGE_CONTACT)
  set(CPACK_PACKAGE_CONTACT "fsdpc developers")
endif()
set(CPACK_STRIP_FILES ON)
set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT)
set(CPACK_DEBIAN_PACKAGE_SECTION devel)
set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS ON)
set(CPACK_DEBIAN_PACKAGE_RECOMMENDS
    "libopenmpi-dev | mpi-default-dev, libdnnl-dev, libssl-dev, llvm-15-dev, libpcre2-dev, libsentencepiece-dev, libutf8proc-dev")
include(CPack)
