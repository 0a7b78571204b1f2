# version.cmake: writes wb_version.h with the commit the checkout is at now. The build runs it
# every time (the wb_version target), so a rebuild after a pull or a commit names its own commit in
# --version, results, traces and the compile choice cache without a reconfigure; configure_file
# rewrites the header only when its text changes, so nothing recompiles otherwise.
#   cmake -DSOURCE_DIR=<checkout> -DOUTPUT=<header> -DPROJECT_VERSION=<x.y.z> -P version.cmake
execute_process(COMMAND git describe --always --dirty --abbrev=12
                WORKING_DIRECTORY ${SOURCE_DIR}
                OUTPUT_VARIABLE WB_GIT_COMMIT OUTPUT_STRIP_TRAILING_WHITESPACE ERROR_QUIET)
if(NOT WB_GIT_COMMIT)
  set(WB_GIT_COMMIT "unknown")
endif()
configure_file(${SOURCE_DIR}/core/base/version.h.in ${OUTPUT} @ONLY)
