# What `flashkv --version` reports about the build: the git commit it was built from and
# the options that change what the binary can do. Read at configure time; `git describe`
# falls back to "unknown" outside a git checkout (a release tarball, the CI's copy).
find_package(Git QUIET)
set(FLASHKV_GIT_DESCRIBE "unknown")
if(GIT_FOUND)
  execute_process(
    COMMAND ${GIT_EXECUTABLE} describe --always --dirty --abbrev=12
    WORKING_DIRECTORY ${CMAKE_CURRENT_SOURCE_DIR}
    OUTPUT_VARIABLE _flashkv_describe
    RESULT_VARIABLE _flashkv_describe_rc
    OUTPUT_STRIP_TRAILING_WHITESPACE ERROR_QUIET)
  if(_flashkv_describe_rc EQUAL 0 AND _flashkv_describe)
    set(FLASHKV_GIT_DESCRIBE "${_flashkv_describe}")
    # A commit or checkout moves HEAD and appends to its reflog; configuring again then keeps
    # the reported commit current without a manual re-run of cmake.
    execute_process(
      COMMAND ${GIT_EXECUTABLE} rev-parse --path-format=absolute --git-path logs/HEAD
      WORKING_DIRECTORY ${CMAKE_CURRENT_SOURCE_DIR}
      OUTPUT_VARIABLE _flashkv_reflog
      OUTPUT_STRIP_TRAILING_WHITESPACE ERROR_QUIET)
    if(_flashkv_reflog AND EXISTS "${_flashkv_reflog}")
      set_property(DIRECTORY APPEND PROPERTY CMAKE_CONFIGURE_DEPENDS "${_flashkv_reflog}")
    endif()
  endif()
endif()
