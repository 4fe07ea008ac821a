# Installation and the Debian package (deploy/README.md, "Debian package").
#
#   cmake --preset release && cmake --build --preset release
#   cd build/release && cpack -G DEB      # -> fabricscope_<version>_<arch>.deb
#
# What goes where (the package's prefix is /usr; the programs' install()
# rules are next to their targets, daemon/ and tools/CMakeLists.txt):
#   /usr/bin/fabricscoped, fabricscope, fabricsim
#   /lib/systemd/system/fabricscoped.service     deploy/systemd (Debian 12 still
#                                                ships units under /lib)
#   /etc/fabricscope/fabricscoped.conf           conffile: every option commented
#                                                out at its default but the package's
#                                                settings, generated from
#                                                `fabricscoped --help`
#                                                (tools/gen-default-config.sh)
#   /usr/share/fabricscope/prometheus/           recording, alerting and fleet rules,
#                                                the example Prometheus configuration
#   /usr/share/fabricscope/grafana/              the host and fleet dashboards
#   /usr/share/man/man8/fabricscoped.8.gz        help2man from --help
#   /usr/share/man/man1/fabricscope.1.gz, fabricsim.1.gz
#   /usr/share/doc/fabricscope/README.md         deploy/README.md (the unit's
#                                                Documentation=)
#   /usr/share/doc/fabricscope/copyright         deploy/deb/copyright (Debian's
#                                                machine-readable format)
#   /usr/share/doc/fabricscope/changelog.gz      deploy/deb/changelog
# Dependencies are computed by dpkg-shlibdeps (dpkg-dev) from the binaries.
# The maintainer scripts (deploy/deb/) only enable, start, stop and purge the
# unit the way dh_installsystemd does; the unit's user is systemd's
# DynamicUser, so there is no user to create.
include(GNUInstallDirs)

# --- generated files: default config, man pages -----------------------------
set(FABRICSCOPE_PACKAGING_DIR ${CMAKE_BINARY_DIR}/packaging)
set(FABRICSCOPE_DEFAULT_CONFIG ${FABRICSCOPE_PACKAGING_DIR}/fabricscoped.conf)
# What the package sets in the conffile (uncommented there), not as a unit
# flag: a flag would win over the file and make editing it do nothing. The
# state directory is the unit's StateDirectory (the memory budgets stay at
# their defaults, which the unit's MemoryMax leaves room for).
set(FABRICSCOPE_PACKAGE_SETTINGS state-dir=/var/lib/fabricscope)
add_custom_command(
  OUTPUT ${FABRICSCOPE_DEFAULT_CONFIG}
  COMMAND ${CMAKE_COMMAND} -E make_directory ${FABRICSCOPE_PACKAGING_DIR}
  COMMAND bash ${CMAKE_SOURCE_DIR}/tools/gen-default-config.sh $<TARGET_FILE:fabricscoped>
          ${FABRICSCOPE_PACKAGE_SETTINGS} > ${FABRICSCOPE_DEFAULT_CONFIG}.tmp
  COMMAND ${CMAKE_COMMAND} -E rename ${FABRICSCOPE_DEFAULT_CONFIG}.tmp ${FABRICSCOPE_DEFAULT_CONFIG}
  DEPENDS fabricscoped ${CMAKE_SOURCE_DIR}/tools/gen-default-config.sh
  COMMENT "fabricscoped.conf (commented defaults from fabricscoped --help)"
  VERBATIM)
set(FABRICSCOPE_PACKAGING_OUTPUTS ${FABRICSCOPE_DEFAULT_CONFIG})

find_program(HELP2MAN_EXECUTABLE help2man)
set(FABRICSCOPE_MAN_PAGES "")
if(HELP2MAN_EXECUTABLE)
  # fabricscope_man_page(<target> <section> <one-line description>): the page
  # from the program's --help (the version is the project's), plus the sections in
  # deploy/deb/<target>.h2m (FILES, SEE ALSO).
  function(fabricscope_man_page target section description)
    set(page ${FABRICSCOPE_PACKAGING_DIR}/${target}.${section})
    set(include ${CMAKE_SOURCE_DIR}/deploy/deb/${target}.h2m)
    add_custom_command(
      OUTPUT ${page}.gz
      COMMAND ${CMAKE_COMMAND} -E make_directory ${FABRICSCOPE_PACKAGING_DIR}
      COMMAND ${HELP2MAN_EXECUTABLE} --no-info --no-discard-stderr --section=${section}
              --name=${description} --include=${include}
              --version-string=${PROJECT_VERSION} --output=${page}
              $<TARGET_FILE:${target}>
      COMMAND gzip -9nf ${page}
      DEPENDS ${target} ${include}
      COMMENT "man page ${target}(${section})"
      VERBATIM)
    set(FABRICSCOPE_MAN_PAGES ${FABRICSCOPE_MAN_PAGES} ${page}.gz PARENT_SCOPE)
    install(FILES ${page}.gz DESTINATION ${CMAKE_INSTALL_MANDIR}/man${section})
  endfunction()
  fabricscope_man_page(fabricscoped 8 "per-host RDMA fabric telemetry daemon")
  fabricscope_man_page(fabricscope 1 "client of the fabricscoped daemon")
  fabricscope_man_page(fabricsim 1 "RoCE fabric simulator for fabricscoped")
  list(APPEND FABRICSCOPE_PACKAGING_OUTPUTS ${FABRICSCOPE_MAN_PAGES})
else()
  message(STATUS "help2man not found: no man pages in the install and the package "
                 "(deploy/bootstrap.sh installs it)")
endif()
# The Debian changelog (a native package's /usr/share/doc/<pkg>/changelog.gz,
# which Debian policy requires): deploy/deb/changelog, whose top entry must
# name the project's version (tests/e2e/deb_package_test.sh checks it).
set(FABRICSCOPE_CHANGELOG ${FABRICSCOPE_PACKAGING_DIR}/changelog.gz)
add_custom_command(
  OUTPUT ${FABRICSCOPE_CHANGELOG}
  COMMAND ${CMAKE_COMMAND} -E make_directory ${FABRICSCOPE_PACKAGING_DIR}
  COMMAND gzip -9n -c ${CMAKE_SOURCE_DIR}/deploy/deb/changelog > ${FABRICSCOPE_CHANGELOG}
  DEPENDS ${CMAKE_SOURCE_DIR}/deploy/deb/changelog
  COMMENT "changelog.gz"
  VERBATIM)
list(APPEND FABRICSCOPE_PACKAGING_OUTPUTS ${FABRICSCOPE_CHANGELOG})
install(FILES ${FABRICSCOPE_CHANGELOG} DESTINATION ${CMAKE_INSTALL_DOCDIR})
add_custom_target(fabricscope_packaging_files ALL DEPENDS ${FABRICSCOPE_PACKAGING_OUTPUTS})

# --- install rules ----------------------------------------------------------
install(FILES ${CMAKE_SOURCE_DIR}/deploy/systemd/fabricscoped.service
        DESTINATION /lib/systemd/system)
install(FILES ${FABRICSCOPE_DEFAULT_CONFIG} DESTINATION /etc/fabricscope)
install(FILES
          ${CMAKE_SOURCE_DIR}/deploy/prometheus/fabricscope-recording.rules.yml
          ${CMAKE_SOURCE_DIR}/deploy/prometheus/fabricscope-alerts.rules.yml
          ${CMAKE_SOURCE_DIR}/deploy/prometheus/fabricscope-fleet.rules.yml
          ${CMAKE_SOURCE_DIR}/deploy/prometheus/prometheus.example.yml
        DESTINATION ${CMAKE_INSTALL_DATADIR}/fabricscope/prometheus)
install(FILES
          ${CMAKE_SOURCE_DIR}/deploy/grafana/fabricscope.json
          ${CMAKE_SOURCE_DIR}/deploy/grafana/fabricscope-fleet.json
        DESTINATION ${CMAKE_INSTALL_DATADIR}/fabricscope/grafana)
install(FILES ${CMAKE_SOURCE_DIR}/deploy/README.md ${CMAKE_SOURCE_DIR}/deploy/deb/copyright
        DESTINATION ${CMAKE_INSTALL_DOCDIR})

# --- CPack: the Debian package ----------------------------------------------
set(FABRICSCOPE_DEB_MAINTAINER "fabricscope maintainers <maintainers@fabricscope.invalid>"
    CACHE STRING "Maintainer field of the Debian package")
set(CPACK_PACKAGE_NAME fabricscope)
set(CPACK_PACKAGE_VENDOR fabricscope)
set(CPACK_PACKAGE_VERSION ${PROJECT_VERSION})
set(CPACK_PACKAGE_CONTACT ${FABRICSCOPE_DEB_MAINTAINER})
set(CPACK_PACKAGE_DESCRIPTION_SUMMARY "per-host RDMA fabric telemetry daemon")
set(CPACK_PACKAGE_DESCRIPTION
    "fabricscoped samples the RDMA (RoCE, InfiniBand) counters of a host every
10 ms, exports them to Prometheus, detects PFC storms, ECN mistuning,
microbursts, retransmit spikes and link degradation, and answers whether a
slow training or inference step was the fabric's fault.
.
The package holds the daemon, its CLI (fabricscope), the fabric simulator
(fabricsim), the systemd unit, a default configuration, the Prometheus rules
and the Grafana dashboards.")
set(CPACK_STRIP_FILES ON)
set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT)  # fabricscope_<version>_<arch>.deb
set(CPACK_DEBIAN_PACKAGE_SECTION net)
set(CPACK_DEBIAN_PACKAGE_PRIORITY optional)
set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS ON)
# (dpkg-shlibdeps finds liblldpctl in Debian's lldpd package: the LLDP
# link-partner source depends on lldpd already.) Prometheus scrapes /metrics.
set(CPACK_DEBIAN_PACKAGE_SUGGESTS prometheus)
# The conffile list (CPack does not mark /etc files itself) and the
# maintainer scripts, mode 0755 as dpkg wants them.
file(WRITE ${FABRICSCOPE_PACKAGING_DIR}/conffiles "/etc/fabricscope/fabricscoped.conf\n")
set(CPACK_DEBIAN_PACKAGE_CONTROL_EXTRA
    ${FABRICSCOPE_PACKAGING_DIR}/conffiles
    ${CMAKE_SOURCE_DIR}/deploy/deb/postinst
    ${CMAKE_SOURCE_DIR}/deploy/deb/prerm
    ${CMAKE_SOURCE_DIR}/deploy/deb/postrm)
set(CPACK_DEBIAN_PACKAGE_CONTROL_STRICT_PERMISSION ON)
set(CPACK_WARN_ON_ABSOLUTE_INSTALL_DESTINATION OFF)
include(CPack)
