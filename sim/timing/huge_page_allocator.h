// An allocator for the timeline's event arrays (hundreds of MB for a long kernel): blocks of 2 MiB
// and more are mapped from the kernel directly and marked for transparent huge pages, so filling
// them costs one page fault per 2 MiB instead of one per 4 KiB (page faults were half of a
// recording run), and freeing one returns its memory at once (the per-unit arrays are freed while
// the timeline is assembled). Where the kernel ignores the advice, they are ordinary pages.
#pragma once
#include <sys/mman.h>

#include <cstdlib>
#include <new>

namespace tpusim {

template <typename T>
struct HugePageAllocator {
  using value_type = T;
  static constexpr size_t kHugePage = size_t{2} << 20;

  HugePageAllocator() = default;
  template <typename U>
  HugePageAllocator(const HugePageAllocator<U>&) {}

  T* allocate(size_t n) {
    const size_t bytes = n * sizeof(T);
    if (bytes < kHugePage) {
      if (void* p = std::malloc(bytes)) return static_cast<T*>(p);
      throw std::bad_alloc();
    }
    void* p =
        mmap(nullptr, rounded(bytes), PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) throw std::bad_alloc();
    madvise(p, rounded(bytes), MADV_HUGEPAGE);
    return static_cast<T*>(p);
  }
  void deallocate(T* p, size_t n) {
    if (n * sizeof(T) < kHugePage)
      std::free(p);
    else
      munmap(p, rounded(n * sizeof(T)));
  }
  static size_t rounded(size_t bytes) { return (bytes + kHugePage - 1) / kHugePage * kHugePage; }

  template <typename U>
  bool operator==(const HugePageAllocator<U>&) const {
    return true;
  }
};

}  // namespace tpusim
