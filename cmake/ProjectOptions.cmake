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
