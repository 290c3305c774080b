// The catalog entries of the kernels this project writes, one function per kernel; catalog.cpp
// registers each with one line. Shared knob sets (the GDN shape) are built here too.
#pragma once
#include <string>
#include <vector>

#include "kernels/catalog.h"
#include "kernels/gdn/shape.h"

namespace tpusim::kernels {

// A dtype knob's value: bf16, f32 or int8.
DType dtype_of(const std::string& s);

CatalogEntry matmul_entry();
CatalogEntry xla_dot_entry();
CatalogEntry elementwise_entry();

// The GDN problem-size knobs (batch, seq, heads, chunk, dk, dv, dtype) with GdnShape's defaults,
// and the shape they describe (checked).
std::vector<Knob> gdn_shape_knobs();
gdn::GdnShape gdn_shape_of(const KnobValues& v);

CatalogEntry gdn_layer_entry();
CatalogEntry gdn_scan_forward_entry();
CatalogEntry gdn_scan_backward_entry();
CatalogEntry gdn_lax_scan_entry();
CatalogEntry gdn_invert_entry();
CatalogEntry gdn_solve_triangular_entry();

}  // namespace tpusim::kernels
