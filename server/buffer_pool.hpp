#pragma once
#include <algorithm>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

namespace vlessbench {

// Fixed-size blocks for transient I/O buffers, kept per thread (one io_context per thread), so a
// busy relay does not allocate per read and an idle one holds nothing. The free blocks a thread
// did not need for a whole period go back to the heap (trim(), from each thread's housekeeping
// timer in server/daemon.cpp), so the pool is as large as the recent need, not the peak.
class buffer_pool {
 public:
  // 256 KiB: a bulk relay makes a quarter of the reads, wake-ups and upstream writes that 64 KiB
  // blocks cost (docs/performance.md "256 KiB relay blocks").
  static constexpr std::size_t block_size = 256 * 1024;
  // What a block holds beyond block_size: a TLS reader's coalescing buffer (server/transport/
  // tls_stream.hpp) takes a block's worth of plaintext in one recv together with its records'
  // headers and tags (at most 64 bytes per 16 KiB record), so what it reads ahead fits one block.
  static constexpr std::size_t block_capacity = block_size + 4 * 1024;
  struct deleter {
    void operator()(char* p) const { local().put(p); }
  };
  using block = std::unique_ptr<char[], deleter>;

  static block get() { return block(local().take()); }

  // Gives the free blocks this thread's pool kept but did not take since the last call back to
  // the heap (the low-water mark of the free list over the period); returns how many.
  static std::size_t trim() { return local().trim_unused(); }

  // Blocks given back to the heap by every thread's pool (the pool full, or trim()): what
  // makes a heap trim (malloc_trim) worth its cost.
  static std::uint64_t released() { return released_.load(std::memory_order_relaxed); }

 private:
  static constexpr std::size_t max_free = 32;  // blocks kept for reuse at most (8 MiB)
  static buffer_pool& local() {
    thread_local buffer_pool pool;
    return pool;
  }
  char* take() {
    if (free_.empty()) {
      low_ = 0;
      return new char[block_capacity];
    }
    char* p = free_.back();
    free_.pop_back();
    low_ = std::min(low_, free_.size());
    return p;
  }
  void put(char* p) {
    if (free_.size() < max_free) {
      free_.push_back(p);
    } else {
      release(p);
    }
  }
  std::size_t trim_unused() {
    const std::size_t n = std::min(low_, free_.size());
    for (std::size_t i = 0; i < n; ++i) {
      release(free_.back());
      free_.pop_back();
    }
    if (free_.empty()) std::vector<char*>().swap(free_);
    low_ = free_.size();
    return n;
  }
  static void release(const char* p) {
    delete[] p;
    released_.fetch_add(1, std::memory_order_relaxed);
  }
  ~buffer_pool() {
    for (char* p : free_) delete[] p;
  }
  std::vector<char*> free_;
  std::size_t low_ = 0;  // the fewest free blocks since the last trim(): these were not needed
  static inline std::atomic<std::uint64_t> released_{0};
};

}  // namespace vlessbench
