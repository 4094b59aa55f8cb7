# Every dependency comes from Debian packages installed by scripts/setup.sh.
set(THREADS_PREFER_PTHREAD_FLAG ON)
find_package(Threads REQUIRED)
find_package(PkgConfig REQUIRED)
find_package(fmt REQUIRED)
find_package(spdlog REQUIRED)
find_package(nlohmann_json REQUIRED)
find_package(CLI11 REQUIRED)
find_package(Boost 1.74 REQUIRED)   # header-only parts: Boost.Math distributions
pkg_check_modules(CK REQUIRED IMPORTED_TARGET ck)
pkg_check_modules(URCU REQUIRED IMPORTED_TARGET liburcu-memb)
pkg_check_modules(SYSTEMD REQUIRED IMPORTED_TARGET libsystemd)   # sd_notify, sd_listen_fds_with_names
if(UVHOST_BUILD_TESTS)
  find_package(GTest REQUIRED)
endif()
if(UVHOST_BUILD_MICROBENCH)
  find_package(benchmark REQUIRED)
endif()
