#pragma once
#include <cstddef>
#include <memory>
#include <vector>

namespace vlessbench {

// Fixed-size blocks for transient I/O buffers, kept per thread (one io_context per thread), so a
// busy relay does not allocate per read and an idle one holds nothing.
class buffer_pool {
 public:
  // 256 KiB: a bulk relay makes a quarter of the reads, wake-ups and upstream writes that 64 KiB
  // blocks cost (bench/run.py --only bulk: CPU-seconds per GiB 0.79-1.03 -> 0.71-0.75).
  static constexpr std::size_t block_size = 256 * 1024;
  struct deleter {
    void operator()(char* p) const { local().put(p); }
  };
  using block = std::unique_ptr<char[], deleter>;

  static block get() { return block(local().take()); }

 private:
  static constexpr std::size_t max_free = 32;  // blocks kept for reuse (8 MiB)
  static buffer_pool& local() {
    thread_local buffer_pool pool;
    return pool;
  }
  char* take() {
    if (free_.empty()) return new char[block_size];
    char* p = free_.back();
    free_.pop_back();
    return p;
  }
  void put(char* p) {
    if (free_.size() < max_free) {
      free_.push_back(p);
    } else {
      delete[] p;
    }
  }
  ~buffer_pool() {
    for (char* p : free_) delete[] p;
  }
  std::vector<char*> free_;
};

}  // namespace vlessbench
