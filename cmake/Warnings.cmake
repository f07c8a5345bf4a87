# Warnings for dseek's own targets: call dseek_warnings(target).
function(dseek_warnings target)
  target_compile_options(${target} PRIVATE
    $<$<COMPILE_LANGUAGE:CXX>:-Wall -Wextra -Wpedantic -Wshadow -Wnon-virtual-dtor
      -Wcast-align -Woverloaded-virtual -Wno-unused-parameter>)
endfunction()
