# Project-wide options live on INTERFACE targets, never in global flags.

option(AR_SANITIZE "Build with AddressSanitizer and UndefinedBehaviorSanitizer" OFF)
option(AR_WARNINGS_AS_ERRORS "Treat compiler warnings as errors" ON)

add_library(ar_warnings INTERFACE)
target_compile_options(ar_warnings INTERFACE
  -Wall -Wextra -Wpedantic -Wshadow -Wconversion -Wsign-conversion
  -Wnon-virtual-dtor -Wold-style-cast -Wcast-align -Woverloaded-virtual
  -Wdouble-promotion -Wformat=2 -Wimplicit-fallthrough
  $<$<BOOL:${AR_WARNINGS_AS_ERRORS}>:-Werror>)

add_library(ar_hardening INTERFACE)
target_compile_options(ar_hardening INTERFACE
  -fstack-protector-strong $<$<NOT:$<CONFIG:Debug>>:-D_FORTIFY_SOURCE=2>)
target_link_options(ar_hardening INTERFACE -Wl,-z,relro,-z,now)

add_library(ar_sanitizers INTERFACE)
if(AR_SANITIZE)
  target_compile_options(ar_sanitizers INTERFACE
    -fsanitize=address,undefined -fno-sanitize-recover=all -fno-omit-frame-pointer)
  target_link_options(ar_sanitizers INTERFACE -fsanitize=address,undefined)
endif()

add_library(ar_options INTERFACE)
target_link_libraries(ar_options INTERFACE ar_warnings ar_hardening ar_sanitizers)

# Most files parse nlohmann-json and much of the standard library again; a
# precompiled header per target parses them once (about a third of a
# build). ar_precompile_headers(TARGET [HEADERS...]) adds these and HEADERS.
option(AR_PCH "Precompile the heavy library headers once per target" ON)
function(ar_precompile_headers target)
  if(AR_PCH)
    target_precompile_headers(${target} PRIVATE
      <nlohmann/json.hpp> <chrono> <functional> <map> <optional> <set> <string> <vector>
      ${ARGN})
  endif()
endfunction()
