# Debian packages, one per host role, from the install rules' components
# (CPack's DEB generator); component: package, what it holds, where it goes.
#
#   plugin: auto-resume-plugin, auto_resume.so in Slurm's plugin folder, its
#     line in /etc/slurm/plugstack.conf.d/auto-resume.conf (commented until
#     the admin sets controller=), the examples; login hosts, batch hosts,
#     nodes.
#   controller: auto-resume-controller, auto-resumed, auto-resume-submit,
#     auto-resumed.service, /etc/slurm/auto-resumed.conf,
#     /var/lib/auto-resume; the controller's host.
#   node: auto-resume-node, auto-resume-agent, auto-resume-healthcheck,
#     auto-resume-agent.service, /etc/default/auto-resume-agent,
#     /etc/auto-resume/healthcheck.conf, /var/lib/auto-resume; nodes.
#   cli: auto-resume-cli, auto-resume; wherever admins and users look.
#
# Each carries the man pages of its programs (AR_MAN must be on), a copyright
# file and a changelog. Build them from a built tree:
#
#   cpack -G DEB --config build/CPackConfig.cmake -B build/packages
#
# They install under /usr (CPACK_PACKAGING_INSTALL_PREFIX), whatever this
# build's CMAKE_INSTALL_PREFIX: everything installed at a relative
# destination lands there. What a package needs that depends on the prefix,
# lies outside it or differs (the units' ExecStart, /etc, /var/lib, gzipped
# man pages, copyright and changelog) comes from rules of their own here,
# EXCLUDE_FROM_ALL so that `cmake --install` leaves them out; the units and
# man pages `cmake --install` puts in place (components units and man) are
# in no package.
#
# lintian (Debian 12's 2.116, --pedantic) finds no error and no warning in
# them; integration.packages fails on either. The informational tags left,
# and why they stay:
#   - binary-has-unneeded-section .comment: CPack strips with plain `strip`
#     (dh_strip also drops .comment, the compiler's version string); the
#     debug symbols are gone all the same.
#   - package-supports-alternative-init-but-no-init.d-script: the daemons
#     come with systemd units only, no SysV init script.
#   - spare-manual-page auto-resume-plugin(8): the plugin's page (its
#     plugstack arguments and srun options) names no program in /usr/bin.

set(AR_DEB_MAINTAINER "slurm-auto-resume <dev@slurm-auto-resume.invalid>" CACHE STRING
    "Maintainer field of the Debian packages")
# Debian 12's merged /usr keeps systemd units in /lib/systemd/system, where
# its own packages (and dh_installsystemd) put them.
set(AR_DEB_UNIT_DIR "/lib/systemd/system" CACHE PATH "Where the Debian packages put the systemd units")

# The Slurm release the plugin is built for, from the headers it was built
# with: Slurm loads a SPANK plugin only into the same major.minor release
# (e.g. 22.05), so the plugin's package depends on that range, never on one
# Debian revision, which every security update changes. Against Debian's
# Slurm, the package holding Slurm's plugin folder and plugstack.conf.d:
# slurm-wlm-basic-plugins, which slurmd (nodes) and slurm-client (login
# hosts, srun) both require at their own exact version, so the range holds
# for whichever of the two loads the plugin. A site-built Slurm
# (SLURM_ROOT) is no Debian package: no such dependency then (such sites
# install with `cmake --install`; the packages are for Debian's Slurm).
file(STRINGS "${SLURM_INCLUDE_DIR}/slurm/slurm_version.h" slurm_version_line
     REGEX "^#define[ \t]+SLURM_VERSION_NUMBER[ \t]+0x[0-9a-fA-F]+")
if(NOT slurm_version_line MATCHES "(0x[0-9a-fA-F]+)")
  message(FATAL_ERROR "no SLURM_VERSION_NUMBER in ${SLURM_INCLUDE_DIR}/slurm/slurm_version.h")
endif()
math(EXPR slurm_major "(${CMAKE_MATCH_1} >> 16) & 255")
math(EXPR slurm_minor "(${CMAKE_MATCH_1} >> 8) & 255")
math(EXPR slurm_next_minor "${slurm_minor} + 1")
# Slurm writes the minor with two digits: 22.05, 23.02.
foreach(var slurm_minor slurm_next_minor)
  if(${var} LESS 10)
    set(${var} "0${${var}}")
  endif()
endforeach()
set(AR_SLURM_RELEASE "${slurm_major}.${slurm_minor}")
set(ar_slurm_next "${slurm_major}.${slurm_next_minor}")
if(SLURM_ROOT)
  set(slurm_package_default "")
else()
  set(slurm_package_default "slurm-wlm-basic-plugins")
endif()
set(AR_DEB_SLURM_PACKAGE "${slurm_package_default}" CACHE STRING
    "Debian package the plugin's package depends on for Slurm ${AR_SLURM_RELEASE} (empty: none)")
set(ar_plugin_slurm_depends "")
if(AR_DEB_SLURM_PACKAGE)
  set(ar_plugin_slurm_depends
      "${AR_DEB_SLURM_PACKAGE} (>= ${AR_SLURM_RELEASE}), ${AR_DEB_SLURM_PACKAGE} (<< ${ar_slurm_next}~)")
endif()

set(ar_deb_prefix "/usr")
set(ar_deb_dir ${CMAKE_CURRENT_BINARY_DIR}/packaging)

# ar_deb_unit(UNIT COMPONENT): UNIT's systemd unit as the packages install
# it, the daemons in /usr/sbin.
function(ar_deb_unit unit component)
  set(CMAKE_INSTALL_FULL_SBINDIR "${ar_deb_prefix}/${CMAKE_INSTALL_SBINDIR}")
  configure_file(examples/${unit}.service.in ${ar_deb_dir}/${unit}.service @ONLY)
  install(FILES ${ar_deb_dir}/${unit}.service DESTINATION ${AR_DEB_UNIT_DIR}
          COMPONENT ${component} EXCLUDE_FROM_ALL)
endfunction()
ar_deb_unit(auto-resumed controller)
ar_deb_unit(auto-resume-agent node)

# Configuration files (conffiles: dpkg keeps the admin's edits on upgrade).
configure_file(examples/auto-resume.plugstack.conf.in ${ar_deb_dir}/auto-resume.conf @ONLY)
install(FILES ${ar_deb_dir}/auto-resume.conf DESTINATION /etc/slurm/plugstack.conf.d
        COMPONENT plugin EXCLUDE_FROM_ALL)
install(FILES examples/auto-resumed.conf DESTINATION /etc/slurm
        COMPONENT controller EXCLUDE_FROM_ALL)
install(FILES examples/healthcheck.conf DESTINATION /etc/auto-resume
        COMPONENT node EXCLUDE_FROM_ALL)
install(FILES examples/auto-resume-agent.default DESTINATION /etc/default
        RENAME auto-resume-agent COMPONENT node EXCLUDE_FROM_ALL)
set(ar_conffiles_plugin /etc/slurm/plugstack.conf.d/auto-resume.conf)
set(ar_conffiles_controller /etc/slurm/auto-resumed.conf)
set(ar_conffiles_node /etc/auto-resume/healthcheck.conf /etc/default/auto-resume-agent)
set(ar_conffiles_cli "")
# The controller's state (state_dir's default; it makes the folder mode 700
# when it starts) and the health check's cpu baseline
# (/var/lib/auto-resume/cpu-baseline, which --record-baseline writes).
foreach(component controller node)
  install(DIRECTORY DESTINATION /var/lib/auto-resume COMPONENT ${component} EXCLUDE_FROM_ALL)
endforeach()

# Man pages, gzipped (Debian policy), each in the package of its program.
find_program(AR_GZIP gzip REQUIRED)
if(AR_MAN)
  set(ar_deb_man "")
  foreach(page_component auto-resume.1:cli auto-resumed.8:controller auto-resumed.conf.5:controller
                         auto-resume-submit.8:controller
                         auto-resume-agent.8:node auto-resume-healthcheck.8:node
                         healthcheck.conf.5:node auto-resume-plugin.8:plugin)
    string(REPLACE ":" ";" page_component "${page_component}")
    list(GET page_component 0 page)
    list(GET page_component 1 component)
    string(REGEX MATCH "[0-9]$" section "${page}")
    set(out ${ar_deb_dir}/man/${page}.gz)
    add_custom_command(OUTPUT ${out}
      COMMAND ${CMAKE_COMMAND} -E make_directory ${ar_deb_dir}/man
      COMMAND sh -c "${AR_GZIP} -9nc ${CMAKE_CURRENT_BINARY_DIR}/man/${page} > ${out}"
      DEPENDS ${CMAKE_CURRENT_BINARY_DIR}/man/${page} VERBATIM)
    list(APPEND ar_deb_man ${out})
    install(FILES ${out} DESTINATION ${CMAKE_INSTALL_MANDIR}/man${section}
            COMPONENT ${component} EXCLUDE_FROM_ALL)
  endforeach()
  add_custom_target(deb_man ALL DEPENDS ${ar_deb_man})
  add_dependencies(deb_man man)
else()
  message(STATUS "AR_MAN=OFF: the Debian packages carry no man pages")
endif()

# Debian policy: /usr/share/doc/PACKAGE/copyright and a changelog in every
# package. The project states no license yet: the copyright file says so
# (to be replaced by the license's text once the project has one).
string(TIMESTAMP ar_changelog_date "%a, %d %b %Y %H:%M:%S +0000" UTC)
file(CONFIGURE OUTPUT ${ar_deb_dir}/changelog CONTENT
"slurm-auto-resume (${PROJECT_VERSION}) unstable; urgency=medium

  * Release ${PROJECT_VERSION}, built for Slurm ${AR_SLURM_RELEASE}.

 -- ${AR_DEB_MAINTAINER}  ${ar_changelog_date}
")
execute_process(COMMAND ${AR_GZIP} -9nc ${ar_deb_dir}/changelog
                OUTPUT_FILE ${ar_deb_dir}/changelog.gz COMMAND_ERROR_IS_FATAL ANY)
file(CONFIGURE OUTPUT ${ar_deb_dir}/copyright CONTENT
"Format: https://www.debian.org/doc/packaging-manuals/copyright-format/1.0/
Upstream-Name: slurm-auto-resume
Upstream-Contact: ${AR_DEB_MAINTAINER}
Comment: Built with CPack from the slurm-auto-resume sources.

Files: *
Copyright: 2026 the slurm-auto-resume authors
License: no-license-stated
 The slurm-auto-resume sources state no license yet.
")

set(ar_components plugin controller node cli)
foreach(component IN LISTS ar_components)
  string(TOUPPER ${component} upper)
  set(package auto-resume-${component})
  set(CPACK_DEBIAN_${upper}_PACKAGE_NAME ${package})
  install(FILES ${ar_deb_dir}/copyright ${ar_deb_dir}/changelog.gz
          DESTINATION ${CMAKE_INSTALL_DATAROOTDIR}/doc/${package}
          COMPONENT ${component} EXCLUDE_FROM_ALL)
  set(conffiles "")
  foreach(file IN LISTS ar_conffiles_${component})
    string(APPEND conffiles "${file}\n")
  endforeach()
  if(conffiles)
    file(CONFIGURE OUTPUT ${ar_deb_dir}/${component}/conffiles CONTENT "${conffiles}")
    set(CPACK_DEBIAN_${upper}_PACKAGE_CONTROL_EXTRA ${ar_deb_dir}/${component}/conffiles)
  endif()
endforeach()

set(CPACK_DEBIAN_PLUGIN_DESCRIPTION
"Slurm SPANK plugin that resumes training steps after a node fails
auto_resume.so adds --auto-resume to srun, sbatch and salloc: a protected
step that loses a node is relaunched in the same allocation, with the
failed node replaced, by the slurm-auto-resume controller (package
auto-resume-controller). Install it on every login host, batch host and
node, then set the controller's address in
/etc/slurm/plugstack.conf.d/auto-resume.conf.
.
Built for Slurm ${AR_SLURM_RELEASE}: Slurm loads it only into that release.")
set(CPACK_DEBIAN_PLUGIN_PACKAGE_DEPENDS "${ar_plugin_slurm_depends}")

set(CPACK_DEBIAN_CONTROLLER_DESCRIPTION
"slurm-auto-resume controller daemon (auto-resumed)
auto-resumed registers the steps srun's auto-resume plugin protects, finds
the nodes that fail under them, takes those nodes out, has them replaced,
grows the job back and relaunches the step in place. Install it on one
host that every login host, batch host and node can reach; configure it in
/etc/slurm/auto-resumed.conf and enable auto-resumed.service.")
set(CPACK_DEBIAN_CONTROLLER_PACKAGE_DEPENDS "munge")
set(CPACK_DEBIAN_CONTROLLER_PACKAGE_RECOMMENDS "slurm-client, auto-resume-cli")

set(CPACK_DEBIAN_NODE_DESCRIPTION
"slurm-auto-resume node agent and health check
auto-resume-agent sends the node's heartbeats to the slurm-auto-resume
controller (auto-resume-agent.service); auto-resume-healthcheck checks GPUs
(nvidia-smi, DCGM), Neuron and EFA devices and the CPUs, and marks a
failing node for replacement, run by slurmd as its HealthCheckProgram
(/etc/auto-resume/healthcheck.conf). Install it on every compute node.")
set(CPACK_DEBIAN_NODE_PACKAGE_DEPENDS "munge")
set(CPACK_DEBIAN_NODE_PACKAGE_RECOMMENDS "slurmd")
set(CPACK_DEBIAN_NODE_PACKAGE_SUGGESTS "stress-ng")

set(CPACK_DEBIAN_CLI_DESCRIPTION
"command line of slurm-auto-resume (auto-resume)
auto-resume shows the steps the slurm-auto-resume controller protects and
what it did (status, events, nodes), and lets root steer it: replace a
node, pause every action, reset the circuit breaker, manage node groups.")
set(CPACK_DEBIAN_CLI_PACKAGE_DEPENDS "munge")

# CPack prepends a summary of its own to every component's description
# unless the summary is its default: each description above starts with the
# package's own summary line instead.
set(CPACK_PACKAGE_DESCRIPTION_SUMMARY "${PROJECT_NAME} built using CMake")
set(CPACK_PACKAGE_NAME ${PROJECT_NAME})
set(CPACK_PACKAGE_VERSION ${PROJECT_VERSION})
set(CPACK_PACKAGE_CONTACT "${AR_DEB_MAINTAINER}")
set(CPACK_GENERATOR DEB)
set(CPACK_COMPONENTS_ALL ${ar_components})
set(CPACK_DEB_COMPONENT_INSTALL ON)
set(CPACK_PACKAGING_INSTALL_PREFIX ${ar_deb_prefix})
set(CPACK_STRIP_FILES ON)
set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT)
set(CPACK_DEBIAN_PACKAGE_SOURCE ${PROJECT_NAME})
set(CPACK_DEBIAN_PACKAGE_SECTION admin)
set(CPACK_DEBIAN_PACKAGE_PRIORITY optional)
set(CPACK_DEBIAN_COMPRESSION_TYPE xz)
set(CPACK_DEBIAN_PACKAGE_CONTROL_STRICT_PERMISSION ON)
# Library dependencies (libslurm38 pins the controller and the node
# programs to this Slurm release's libslurm) from dpkg-shlibdeps.
set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS ON)
include(CPack)
