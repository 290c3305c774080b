// measured_runs.md C5 #41: MaxText 16B on 1 to 32 v5e-256 slices (data parallel over DCN). The
// compiled steps reduce each layer's gradient over the slices behind the next layer's backward,
// and at the DCN's published bandwidth that explains none of the measured drop (docs/
// compiler_import.md). `calibrate` fits dcn_slice_latency_s, what each step of a ring over the
// slices adds beyond the bandwidth, on the drop from 1 to 32 slices; 2, 4, 8 and 16 check it.
#pragma once
#include <string>
#include <vector>

#include "app/step_fit.h"

namespace tpusim {

struct SliceRow {
  std::string file;
  int64_t slices = 1;
  double measured_tflops = 0, predicted_tflops = 0;
  double error_pct() const {
    return 100.0 * (predicted_tflops - measured_tflops) / measured_tflops;
  }
};

struct SliceTable {
  std::vector<SliceRow> rows;  // by slice count, the single slice first
};

// The single-slice run (C3 #41) and its multi-slice runs (C5 #41) from the repository.
SliceTable load_slice_table();
void predict(SliceTable& t, double dcn_slice_latency_s, const EngineConstants& e);

// Bisection on the latency until the predicted TFLOP/s of the most slices over the single
// slice's meets the measured ratio.
StepConstantFit fit_dcn_slice_latency(const SliceTable& t, const EngineConstants& e);

// The fit and every row (docs/calibration.md).
std::string dcn_calibration_markdown(const StepConstantFit& fit, const SliceTable& t);

}  // namespace tpusim
