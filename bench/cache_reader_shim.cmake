# libloft_bench_cache_reader: the in-process RocksDB baseline that
# bench/torch_consumer_bench.py loads with ctypes (benchmark-only, not
# installed, not part of libloft's API). Debian's librocksdb.a is not
# position-independent: the shim links the shared librocksdb (listed
# first, so the static one is never pulled in); skipped without it.
find_library(LOFT_ROCKSDB_SHARED NAMES librocksdb.so rocksdb.so)
if(LOFT_ROCKSDB_SHARED)
  add_library(loft_bench_cache_reader SHARED ${CMAKE_CURRENT_SOURCE_DIR}/cache_reader_shim.cc)
  target_link_libraries(loft_bench_cache_reader PRIVATE ${LOFT_ROCKSDB_SHARED} loft_cache)
  set_target_properties(loft_bench_cache_reader PROPERTIES LIBRARY_OUTPUT_DIRECTORY ${CMAKE_BINARY_DIR}/lib)
  loft_add_warnings(loft_bench_cache_reader)
endif()
