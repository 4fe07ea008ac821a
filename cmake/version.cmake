# Writes daemon/version.h with the source tree's git revision. Run at build time
# (the fabricscope_version target) so that a binary reports the revision it was
# built from, not the one CMake was last configured at; configure_file rewrites
# the header only when its text changes, so an unchanged revision recompiles
# nothing.
#   cmake -DSOURCE_DIR=... -DOUTPUT=... -DVERSION=... -P cmake/version.cmake
execute_process(
  COMMAND git rev-parse --short=12 HEAD
  WORKING_DIRECTORY ${SOURCE_DIR}
  OUTPUT_VARIABLE FABRICSCOPE_REVISION
  OUTPUT_STRIP_TRAILING_WHITESPACE ERROR_QUIET)
if(NOT FABRICSCOPE_REVISION)
  set(FABRICSCOPE_REVISION "unknown")
endif()
set(PROJECT_VERSION ${VERSION})
configure_file(${SOURCE_DIR}/daemon/version.h.in ${OUTPUT} @ONLY)
