# lua_from_source.cmake: the Lua the executable links, as the target wb_lua.
#   WB_LUA_SOURCE_DIR empty (the default): Debian's liblua5.4 through pkg-config.
#   WB_LUA_SOURCE_DIR=<dir>: Lua compiled here from Debian's unpacked lua5.4 source package
#   (`apt-get source lua5.4`, patches applied; scripts/bootstrap.sh fetches it for the sanitizer
#   build), with this build's flags: under WB_SANITIZE, AddressSanitizer sees inside the
#   interpreter too (a freed lua_State or string read by our code), which Debian's uninstrumented
#   library hides. Not a vendored copy: the source stays in the build tree, outside git.
#
# Built with Debian's own defines (LUA_COMPAT_5_3, LUA_USE_LINUX; the multiarch header its
# luaconf.h patch includes, so package.path and package.cpath find lua-unit, lua-argparse and
# lua-cjson where the system interpreter finds them), plus LUA_USE_APICHECK: a C function that
# misuses the API (pops too much, wrong index) stops at an assert instead of corrupting the stack.
# The objects go into the executable itself, which exports them (ENABLE_EXPORTS): C modules such
# as cjson.so link no liblua and take lua_* from the executable that loads them.

set(WB_LUA_SOURCE_DIR "" CACHE PATH
    "Unpacked Debian lua5.4 source to build Lua from (empty: the system's liblua5.4)")

if(WB_LUA_SOURCE_DIR)
  set(src ${WB_LUA_SOURCE_DIR}/src)
  if(NOT EXISTS ${src}/lapi.c OR NOT EXISTS ${src}/luaconf.h)
    message(FATAL_ERROR "WB_LUA_SOURCE_DIR=${WB_LUA_SOURCE_DIR}: no Lua source there (src/lapi.c)")
  endif()
  file(STRINGS ${src}/lua.h release_line REGEX "define LUA_VERSION_RELEASE[ \t]")
  string(REGEX REPLACE ".*\"([0-9]+)\".*" "\\1" release "${release_line}")
  file(STRINGS ${src}/lua.h version_lines REGEX "define LUA_VERSION_M(AJOR|INOR)[ \t]")
  if(NOT version_lines MATCHES "MAJOR[ \t]+\"5\".*MINOR[ \t]+\"4\"")
    message(FATAL_ERROR "WB_LUA_SOURCE_DIR=${WB_LUA_SOURCE_DIR}: not Lua 5.4 (${version_lines})")
  endif()

  # Debian's luaconf.h includes this header for the multiarch module folder.
  set(multiarch "${CMAKE_LIBRARY_ARCHITECTURE}")
  if(NOT multiarch)
    execute_process(COMMAND gcc -print-multiarch OUTPUT_VARIABLE multiarch OUTPUT_STRIP_TRAILING_WHITESPACE)
  endif()
  file(CONFIGURE OUTPUT ${CMAKE_BINARY_DIR}/generated/lua/lua5.4-deb-multiarch.h CONTENT
       "#ifndef _LUA_DEB_MULTIARCH_\n#define _LUA_DEB_MULTIARCH_\n#define DEB_HOST_MULTIARCH \"${multiarch}\"\n#endif\n")

  file(GLOB lua_sources ${src}/*.c)
  list(REMOVE_ITEM lua_sources ${src}/lua.c ${src}/luac.c) # the standalone interpreter and compiler
  add_library(wb_lua OBJECT ${lua_sources})
  # luaconf.h includes the multiarch header: users of lua.h need its folder too
  target_include_directories(wb_lua SYSTEM PUBLIC ${src} ${CMAKE_BINARY_DIR}/generated/lua)
  # the library's own build flags, as Debian's: its users see the same headers as Debian's users
  target_compile_definitions(wb_lua PRIVATE LUA_COMPAT_5_3 LUA_USE_LINUX LUA_USE_APICHECK)
  # -O2 as Debian builds it (the sanitizer build is otherwise -O0: every Lua test would crawl);
  # someone else's code: its warnings are shown, never turned into errors.
  target_compile_options(wb_lua PRIVATE -O2 -Wno-error)
  target_link_libraries(wb_lua PUBLIC m ${CMAKE_DL_LIBS})
  set(WB_LUA_FROM_SOURCE ON)
  message(STATUS "Lua: 5.4.${release} built from ${WB_LUA_SOURCE_DIR} with this build's flags")
else()
  pkg_check_modules(LUA REQUIRED IMPORTED_TARGET lua5.4)
  add_library(wb_lua INTERFACE)
  target_link_libraries(wb_lua INTERFACE PkgConfig::LUA)
  set(WB_LUA_FROM_SOURCE OFF)
  message(STATUS "Lua: the system's liblua5.4 ${LUA_VERSION}")
endif()
