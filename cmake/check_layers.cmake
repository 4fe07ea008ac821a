# The layer rule (ARCHITECTURE.md, "Layers"): a file includes only its own
# layer and the layers below it.
#
#   rank  layer       paths
#    0    core        core/                       (the ground)
#   10    store       store/
#   20    collectors  collectors/                 (peers: neither includes
#   20    exporters   exporters/                   the other)
#   30    analysis    daemon/scheduler.*, daemon/{spans,correlate,detect,query,state}/
#   35    proto       generated fabricscope/v1/*.pb.h, opentelemetry/*.pb.h, kubelet/*.pb.h
#   40    ingest      daemon/{ingest,recording,kubernetes}/
#   50    service     daemon/service/             (gRPC adapters)
#   60    daemon      daemon/* (the roof: config, daemon, privileges, main)
#   70    tools       tools/, bench/, tests/, fuzz/ (may include anything)
#
# Runs at configure time (CMakeLists.txt: a violation fails the configure) and
# as the test layer_rule (tests/e2e/layer_rule_test.sh), which also checks
# that a planted violation is caught. Standalone:
#   cmake -DLAYER_CHECK_ROOT=<tree> -P cmake/check_layers.cmake

# fabricscope_layer_of(<path relative to the root> <out rank> <out name>)
function(fabricscope_layer_of path out_rank out_name)
  set(rank "")
  set(name "")
  if(path MATCHES "^core/")
    set(rank 0)
    set(name core)
  elseif(path MATCHES "^store/")
    set(rank 10)
    set(name store)
  elseif(path MATCHES "^collectors/")
    set(rank 20)
    set(name collectors)
  elseif(path MATCHES "^exporters/")
    set(rank 20)
    set(name exporters)
  elseif(path MATCHES "^daemon/(scheduler\\.|spans/|correlate/|detect/|query/|state/)")
    set(rank 30)
    set(name analysis)
  elseif(path MATCHES "^(fabricscope/v1/|opentelemetry/|kubelet/)")
    set(rank 35)
    set(name proto)
  elseif(path MATCHES "^daemon/(ingest|recording|kubernetes)/")
    set(rank 40)
    set(name ingest)
  elseif(path MATCHES "^daemon/service/")
    set(rank 50)
    set(name service)
  elseif(path MATCHES "^daemon/")
    set(rank 60)
    set(name daemon)
  elseif(path MATCHES "^(tools|bench|tests|fuzz)/")
    set(rank 70)
    set(name tools)
  endif()
  set(${out_rank} "${rank}" PARENT_SCOPE)
  set(${out_name} "${name}" PARENT_SCOPE)
endfunction()

# fabricscope_check_layers(<root> <out violations>): one line per include
# that breaks the rule ("file: includes X (layer) from layer").
function(fabricscope_check_layers root out)
  file(GLOB_RECURSE files RELATIVE ${root}
    ${root}/core/*.h ${root}/core/*.cc
    ${root}/store/*.h ${root}/store/*.cc
    ${root}/collectors/*.h ${root}/collectors/*.cc
    ${root}/exporters/*.h ${root}/exporters/*.cc
    ${root}/daemon/*.h ${root}/daemon/*.cc ${root}/daemon/*.h.in)
  set(violations "")
  foreach(f ${files})
    fabricscope_layer_of(${f} own_rank own_name)
    # Quoted and angle-bracket includes: <store/store.h> names a project
    # header as surely as "store/store.h" (system headers map to no layer).
    file(STRINGS ${root}/${f} lines REGEX "^[ \t]*#[ \t]*include[ \t]*[\"<]")
    foreach(line ${lines})
      string(REGEX REPLACE "^[ \t]*#[ \t]*include[ \t]*[\"<]([^\">]*)[\">].*" "\\1" inc
        "${line}")
      fabricscope_layer_of(${inc} inc_rank inc_name)
      if(inc_name STREQUAL "" OR inc_name STREQUAL own_name)
        continue()
      endif()
      if(NOT inc_rank LESS own_rank)
        list(APPEND violations "${f} (${own_name}) includes ${inc} (${inc_name})")
      endif()
    endforeach()
  endforeach()
  set(${out} "${violations}" PARENT_SCOPE)
endfunction()

# fabricscope_require_layer_rule(<root>): fails (FATAL_ERROR, listing every
# violation) unless the tree under <root> keeps the rule.
function(fabricscope_require_layer_rule root)
  fabricscope_check_layers(${root} violations)
  if(violations)
    string(REPLACE ";" "\n  " text "${violations}")
    message(FATAL_ERROR "layer rule broken (a layer includes only layers below it; "
      "cmake/check_layers.cmake):\n  ${text}")
  endif()
endfunction()

if(CMAKE_SCRIPT_MODE_FILE)
  if(NOT LAYER_CHECK_ROOT)
    get_filename_component(LAYER_CHECK_ROOT "${CMAKE_CURRENT_LIST_DIR}/.." ABSOLUTE)
  endif()
  fabricscope_require_layer_rule(${LAYER_CHECK_ROOT})
  message(STATUS "layer rule: ok")
endif()
