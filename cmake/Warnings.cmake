# Warnings every uvhost target is built with; -Werror in CI (UVHOST_WERROR=ON).
# Not -Wnull-dereference: GCC 12 reports false positives inside libstdc++'s
# std::string (seen in CLI11 code under -fsanitize=thread -O1).
function(uvhost_target_warnings target)
  target_compile_options(${target} PRIVATE
    $<$<COMPILE_LANGUAGE:CXX>:-Wall -Wextra -Wpedantic -Wshadow -Wnon-virtual-dtor
      -Wold-style-cast -Wcast-align -Wunused -Woverloaded-virtual -Wconversion
      -Wsign-conversion -Wdouble-promotion -Wformat=2 -Wimplicit-fallthrough>
    $<$<COMPILE_LANGUAGE:C>:-Wall -Wextra>
    # clang checks the UVHOST_GUARDED_BY annotations (sync/thread_annotations.h).
    $<$<CXX_COMPILER_ID:Clang>:-Wthread-safety>)
  if(UVHOST_WERROR)
    target_compile_options(${target} PRIVATE -Werror)
  endif()
endfunction()
