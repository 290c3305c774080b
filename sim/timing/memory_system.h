// HBM and the DMA queues that move blocks between HBM and VMEM, joined by a TLM-2.0 socket.
// A DMA request pays the DMA latency (descriptor issue and HBM access), then its bytes occupy the
// shared HBM pipe at the chip's bandwidth, first come first served. Both TensorCores of a megacore
// chip share one Hbm. Timing is annotated (loosely timed): b_transport returns the completion delay
// and never waits, so a transfer costs no SystemC events of its own.
#pragma once
#include <tlm_utils/multi_passthrough_target_socket.h>
#include <tlm_utils/simple_initiator_socket.h>

#include <systemc>
#include <tlm>

#include "sim/chip_spec.h"
#include "sim/timing/recorder.h"

namespace tpusim {

// Carries timeline information with each transfer: what it moves, and when HBM served it.
struct DmaTag : tlm::tlm_extension<DmaTag> {
  int label = 0;
  EventTag event;
  int64_t served_start = 0, served_end = 0;
  tlm_extension_base* clone() const override { return new DmaTag(*this); }
  void copy_from(const tlm_extension_base& other) override {
    *this = static_cast<const DmaTag&>(other);
  }
};

class Hbm : public sc_core::sc_module {
 public:
  tlm_utils::multi_passthrough_target_socket<Hbm> socket;  // one binding per DMA queue

  Hbm(sc_core::sc_module_name name, const ChipSpec& chip, Recorder& rec);
  int64_t read_bytes() const { return read_bytes_; }
  int64_t write_bytes() const { return write_bytes_; }
  // The pipe keeps time in 1/kSubcycles of a cycle, in integers, so that a transfer's occupancy
  // and every comparison come out the same whatever the absolute time (a double's rounding grows
  // with it): a call replayed or fast-forwarded at another time behaves as it was simulated.
  static constexpr int64_t kSubcycles = int64_t{1} << 16;
  // How long after cycle `t` the pipe is still busy, in 1/kSubcycles (not positive: free).
  int64_t busy_after(int64_t t) const { return free_at_ - t * kSubcycles; }
  // A kernel call replayed (engine.cpp): from cycle `t` the pipe is busy for `busy_after`, having
  // moved the bytes.
  void replay(int64_t t, int64_t busy_after, int64_t read_bytes, int64_t write_bytes) {
    free_at_ = t * kSubcycles + busy_after;
    read_bytes_ += read_bytes;
    write_bytes_ += write_bytes;
  }
  // The fast-forward's jump (steady_state.h): the pipe `cycles` later, having moved the bytes.
  void skip(int64_t cycles, int64_t read_bytes, int64_t write_bytes) {
    free_at_ += cycles * kSubcycles;
    read_bytes_ += read_bytes;
    write_bytes_ += write_bytes;
  }

 private:
  void b_transport(int initiator, tlm::tlm_generic_payload& gp, sc_core::sc_time& delay);
  double bytes_per_cycle_;
  Recorder& rec_;
  int unit_;
  int64_t free_at_ = 0;  // when the pipe is next free, in 1/kSubcycles
  int64_t read_bytes_ = 0, write_bytes_ = 0;
};

class DmaQueue : public sc_core::sc_module {
 public:
  tlm_utils::simple_initiator_socket<DmaQueue> socket;

  DmaQueue(sc_core::sc_module_name name, const ChipSpec& chip, Recorder& rec, int core, int index);
  ~DmaQueue() override { gp_.clear_extension(&tag_); }  // the payload must not free a member
  // Starts a transfer at cycle `at` (the requesting core's local time, at or after SystemC's
  // present: a core may run ahead of it, TLM's temporal decoupling); returns the cycle at which its
  // data has arrived.
  int64_t transfer(int64_t at, int64_t bytes, bool to_hbm, int label, const EventTag& event);

 private:
  Recorder& rec_;
  int unit_;
  int64_t latency_;
  tlm::tlm_generic_payload gp_;
  DmaTag tag_;
};

}  // namespace tpusim
