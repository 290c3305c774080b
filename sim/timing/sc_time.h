// Simulated time is counted in core cycles. The SystemC kernel runs at 1 ps resolution and one
// picosecond of SystemC time stands for one core cycle, so all timing arithmetic is exact integer
// arithmetic; seconds come from the chip clock only when results are reported.
#pragma once
#include <cstdint>
#include <systemc>

namespace tpusim {

inline sc_core::sc_time cycles(int64_t c) {
  return sc_core::sc_time::from_value(static_cast<sc_dt::uint64>(c));
}
inline int64_t now_cycles() { return static_cast<int64_t>(sc_core::sc_time_stamp().value()); }

}  // namespace tpusim
