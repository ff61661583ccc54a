# -DFSDPC_SANITIZE=ON builds everything with AddressSanitizer and
# UndefinedBehaviorSanitizer (tools/test.sh --only sanitize, folder
# build-asan/). UBSan stops at its first report, so a finding fails the test
# instead of scrolling past; the suppressions live in test/sanitizer/.
option(FSDPC_SANITIZE "Build with -fsanitize=address,undefined" OFF)
if(FSDPC_SANITIZE)
  set(fsdpc_sanitize_flags -fsanitize=address,undefined -fno-sanitize-recover=all
                           -fno-omit-frame-pointer)
  add_compile_options("$<$<COMPILE_LANGUAGE:CXX>:${fsdpc_sanitize_flags}>")
  add_link_options(${fsdpc_sanitize_flags})
  # ASan replaces malloc; an executable linked with mimalloc would bypass it.
  set(FSDPC_MIMALLOC OFF)
  message(STATUS "fsdpc: sanitizers address,undefined (mimalloc off)")
endif()
