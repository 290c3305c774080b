# All third-party code comes from Debian packages (see scripts/setup.sh).
find_package(PkgConfig REQUIRED)
pkg_check_modules(SYSTEMC REQUIRED IMPORTED_TARGET systemc)
find_package(Eigen3 3.4 REQUIRED NO_MODULE)
find_package(yaml-cpp REQUIRED)
find_package(fmt REQUIRED)
find_package(nlohmann_json 3 REQUIRED)
find_package(CLI11 REQUIRED)
pkg_check_modules(PLPLOT REQUIRED IMPORTED_TARGET plplot-c++)  # charts (app/plots.h)
find_package(EXPAT REQUIRED)  # the tests read the charts' SVG
find_package(ZLIB REQUIRED)  # gzip-compressed profiles (perfetto_trace.json.gz)

# SystemC 2.3.4 on Debian is built as C++17; C++20 units must claim C++17 to link (environment.md).
add_library(tpusim_systemc INTERFACE)
target_link_libraries(tpusim_systemc INTERFACE PkgConfig::SYSTEMC)
target_compile_definitions(tpusim_systemc INTERFACE SC_CPLUSPLUS=201703L)
