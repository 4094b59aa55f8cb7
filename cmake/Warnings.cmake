# Warnings every uvhost target is built with; -Werror in CI (UVHOST_WERROR=ON).
function(uvhost_target_warnings target)
  target_compile_options(${target} PRIVATE
    $<$<COMPILE_LANGUAGE:CXX>:-Wall -Wextra -Wpedantic -Wshadow -Wnon-virtual-dtor
      -Wold-style-cast -Wcast-align -Wunused -Woverloaded-virtual -Wconversion
      -Wsign-conversion -Wnull-dereference -Wdouble-promotion -Wformat=2 -Wimplicit-fallthrough>
    $<$<COMPILE_LANGUAGE:C>:-Wall -Wextra>)
  if(UVHOST_WERROR)
    target_compile_options(${target} PRIVATE -Werror)
  endif()
endfunction()
