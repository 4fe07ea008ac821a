# fabricscope_library(<name> SOURCES <src...> [LAYERS <fabricscope libs>] [DEPS <other libs>])
#
# One static library of one layer (ARCHITECTURE.md, "Layers"). LAYERS names
# the fabricscope libraries below it that it uses; they are linked as whole
# archives, here and in everything that links <name>, because metric
# declarations register themselves from static initialisers (core/metrics.h)
# and must not be dropped by the linker. DEPS are system libraries.
# Sources are listed explicitly (no globbing), relative to the calling
# directory.
function(fabricscope_library name)
  cmake_parse_arguments(ARG "" "" "SOURCES;LAYERS;DEPS" ${ARGN})
  add_library(${name} STATIC ${ARG_SOURCES})
  target_include_directories(${name} PUBLIC ${CMAKE_SOURCE_DIR} ${CMAKE_BINARY_DIR}/generated)
  set(layers "")
  foreach(layer ${ARG_LAYERS})
    list(APPEND layers "$<LINK_LIBRARY:WHOLE_ARCHIVE,${layer}>")
  endforeach()
  target_link_libraries(${name} PUBLIC ${layers} ${ARG_DEPS})
endfunction()

# fabricscope_link(<target> <fabricscope libs...>): an executable links the
# layers it uses, whole (see above).
function(fabricscope_link target)
  set(layers "")
  foreach(layer ${ARGN})
    list(APPEND layers "$<LINK_LIBRARY:WHOLE_ARCHIVE,${layer}>")
  endforeach()
  target_link_libraries(${target} PRIVATE ${layers})
endfunction()
