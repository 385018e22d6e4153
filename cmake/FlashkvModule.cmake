# flashkv_module(NAME DEPS a b c)
# One static library per folder under src/. Sources are globbed so that adding a file to
# a module never needs an edit here; a folder with no .cpp yet is an INTERFACE library.
function(flashkv_module name)
  cmake_parse_arguments(ARG "" "" "DEPS;EXTRA_DIRS" ${ARGN})
  file(GLOB _srcs CONFIGURE_DEPENDS ${CMAKE_CURRENT_SOURCE_DIR}/*.cpp)
  foreach(_d ${ARG_EXTRA_DIRS})
    file(GLOB _more CONFIGURE_DEPENDS ${CMAKE_CURRENT_SOURCE_DIR}/${_d}/*.cpp)
    list(APPEND _srcs ${_more})
  endforeach()
  set(_target flashkv_${name})
  if(_srcs)
    add_library(${_target} STATIC ${_srcs})
    target_include_directories(${_target} PUBLIC ${PROJECT_SOURCE_DIR}/src)
    target_compile_options(${_target} PRIVATE ${FLASHKV_WARNINGS})
    target_link_libraries(${_target} PUBLIC ${ARG_DEPS})
  else()
    add_library(${_target} INTERFACE)
    target_include_directories(${_target} INTERFACE ${PROJECT_SOURCE_DIR}/src)
    target_link_libraries(${_target} INTERFACE ${ARG_DEPS})
  endif()
endfunction()

# flashkv_test(NAME DEPS a b c [LABELS l...])
# One GoogleTest executable per module: every tests/<module>/*_test.cpp.
function(flashkv_test name)
  cmake_parse_arguments(ARG "" "" "DEPS;LABELS" ${ARGN})
  file(GLOB _srcs CONFIGURE_DEPENDS ${CMAKE_CURRENT_SOURCE_DIR}/*_test.cpp)
  if(NOT _srcs)
    return()
  endif()
  set(_target ${name}_test)
  add_executable(${_target} ${_srcs})
  target_compile_options(${_target} PRIVATE ${FLASHKV_WARNINGS})
  target_link_libraries(${_target} PRIVATE ${ARG_DEPS} GTest::gtest GTest::gmock GTest::gtest_main)
  target_compile_definitions(${_target} PRIVATE
    FLASHKV_SOURCE_DIR="${FLASHKV_SOURCE_DIR}"
    FLASHKV_FIXTURES_DIR="${FLASHKV_FIXTURES_DIR}"
    FLASHKV_BINARY_DIR="${PROJECT_BINARY_DIR}")
  if(NOT ARG_LABELS)
    set(ARG_LABELS unit)
  endif()
  gtest_discover_tests(${_target} DISCOVERY_MODE PRE_TEST PROPERTIES LABELS "${ARG_LABELS}"
    WORKING_DIRECTORY ${PROJECT_BINARY_DIR})
  if("unit" IN_LIST ARG_LABELS)
    flashkv_unit_target(${_target})
  endif()
endfunction()

# flashkv_unit_target(target): what `ctest -L unit` runs is built by the `unit_tests`
# target (tests/CMakeLists.txt), so `make test-asan` builds only that and not the CLI,
# benches and integration tools its ctest run never starts.
function(flashkv_unit_target target)
  set_property(GLOBAL APPEND PROPERTY FLASHKV_UNIT_TARGETS ${target})
endfunction()
