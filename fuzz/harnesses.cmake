# How each harness is built, shared by the libFuzzer build (fuzz/CMakeLists.txt) and the
# replay tests (tests/CMakeLists.txt), which link the same harness source to replay_main.cpp.
set(SQAR_FUZZ_HARNESSES fuzz_image fuzz_sqarfs fuzz_codec fuzz_manifest fuzz_tar)

# sqar_add_harness(TARGET HARNESS [EXTRA_SOURCES...])
function(sqar_add_harness target harness)
  set(dir ${PROJECT_SOURCE_DIR}/fuzz)
  add_executable(${target} ${dir}/${harness}.cpp ${ARGN})
  target_include_directories(${target} PRIVATE ${dir})
  target_link_libraries(${target} PRIVATE sqar_reader sqar_core)
  if(harness STREQUAL "fuzz_tar")
    target_link_libraries(${target} PRIVATE sqar_writer)  # src/tarin/, with libarchive
  endif()
  if(harness STREQUAL "fuzz_sqarfs")
    # sqarfs's request handlers and what they use, compiled as in sqarfs; the libfuse reply
    # functions come from fuse_replies.cpp instead of libfuse (see fuse_replies.h).
    set(fuse ${PROJECT_SOURCE_DIR}/fuse)
    target_sources(${target} PRIVATE ${dir}/fuse_replies.cpp ${fuse}/filesystem.cpp ${fuse}/caller.cpp ${fuse}/log.cpp
                                     ${fuse}/options.cpp ${fuse}/prefetcher.cpp ${fuse}/resident_code.cpp)
    target_include_directories(${target} PRIVATE ${fuse} ${FUSE3_INCLUDE_DIRS})
    target_compile_options(${target} PRIVATE ${FUSE3_CFLAGS_OTHER})
    target_link_libraries(${target} PRIVATE Threads::Threads)
  endif()
endfunction()
