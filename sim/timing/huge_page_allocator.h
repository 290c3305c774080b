// An allocator for the timeline's event arrays (hundreds of MB for a long kernel): blocks of 2 MiB
// and more are 2 MiB aligned and marked for transparent huge pages, so filling them costs one
// page fault per 2 MiB instead of one per 4 KiB (page faults were half of a recording run). Where
// the kernel does not honour the advice, it is an ordinary aligned allocation.
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
    const size_t rounded = (bytes + kHugePage - 1) / kHugePage * kHugePage;
    void* p = std::aligned_alloc(kHugePage, rounded);
    if (!p) throw std::bad_alloc();
    madvise(p, rounded, MADV_HUGEPAGE);
    return static_cast<T*>(p);
  }
  void deallocate(T* p, size_t) { std::free(p); }

  template <typename U>
  bool operator==(const HugePageAllocator<U>&) const {
    return true;
  }
};

}  // namespace tpusim
