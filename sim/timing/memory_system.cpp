#include "sim/timing/memory_system.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "sim/timing/sc_time.h"

namespace tpusim {

Hbm::Hbm(sc_core::sc_module_name name, const ChipSpec& chip, Recorder& rec)
    : sc_module(name),
      socket("socket"),
      bytes_per_cycle_(chip.hbm_bytes_per_cycle()),
      rec_(rec),
      unit_(rec.add_unit("hbm", UnitKind::hbm, -1)) {
  socket.register_b_transport(this, &Hbm::b_transport);
}

void Hbm::b_transport(int, tlm::tlm_generic_payload& gp, sc_core::sc_time& delay) {
  const int64_t requested = now_cycles() + static_cast<int64_t>(delay.value());
  const int64_t bytes = gp.get_data_length();
  // The pipe is occupied for a fractional number of cycles, so back-to-back transfers do not
  // each round up; only the completion a requester sees is rounded up to a whole cycle.
  const int64_t start = std::max(requested * kSubcycles, free_at_);
  free_at_ = start + std::llround(static_cast<double>(bytes) * kSubcycles / bytes_per_cycle_);
  const int64_t served_start = (start + kSubcycles / 2) / kSubcycles,
                served_end = (free_at_ + kSubcycles / 2) / kSubcycles,
                done = (free_at_ + kSubcycles - 1) / kSubcycles;
  (gp.is_write() ? write_bytes_ : read_bytes_) += bytes;
  DmaTag* tag = gp.get_extension<DmaTag>();
  if (tag) {
    tag->served_start = served_start;
    tag->served_end = served_end;
    rec_.busy(unit_, served_start, served_end, tag->label, tag->event);
  }
  delay = cycles(done - now_cycles());
  gp.set_response_status(tlm::TLM_OK_RESPONSE);
}

DmaQueue::DmaQueue(sc_core::sc_module_name name, const ChipSpec& chip, Recorder& rec, int core,
                   int index)
    : sc_module(name),
      socket("socket"),
      rec_(rec),
      unit_(rec.add_unit(fmt::format("tc{}.dma{}", core, index), UnitKind::dma, core)),
      latency_(chip.dma_latency_cycles) {
  gp_.set_extension(&tag_);
}

int64_t DmaQueue::transfer(int64_t at, int64_t bytes, bool to_hbm, int label,
                           const EventTag& event) {
  gp_.set_command(to_hbm ? tlm::TLM_WRITE_COMMAND : tlm::TLM_READ_COMMAND);
  gp_.set_address(0);
  gp_.set_data_ptr(nullptr);
  gp_.set_data_length(static_cast<unsigned>(bytes));
  gp_.set_response_status(tlm::TLM_INCOMPLETE_RESPONSE);
  tag_.label = label;
  tag_.event = event;
  sc_core::sc_time delay = cycles(at - now_cycles() + latency_);
  socket->b_transport(gp_, delay);
  rec_.busy(unit_, tag_.served_start, tag_.served_end, label, event);
  return now_cycles() + static_cast<int64_t>(delay.value());
}

}  // namespace tpusim
