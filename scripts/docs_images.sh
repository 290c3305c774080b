#!/usr/bin/env bash
# Regenerates the timeline pictures and charts in docs/img from the simulator (after
# scripts/build.sh).
set -euo pipefail
cd "$(dirname "$0")/.."
t=build/tpusim
$t kernel matmul --chip v5e --m 4096 --k 4096 --n 4096 --bm 512 --bk 1024 --bn 1024 \
  --svg docs/img/matmul_v5e_4096.svg --window-us 100 135 >/dev/null
$t kernel matmul --chip v5e --m 1024 --k 1024 --n 1024 --bm 128 --bk 128 --bn 128 \
  --svg docs/img/matmul_v5e_1024_b128.svg --window-us 105 112 >/dev/null
$t kernel matmul --chip v5p --m 4096 --k 4096 --n 4096 --bm 512 --bk 1024 --bn 1024 \
  --svg docs/img/matmul_v5p_megacore.svg --window-us 105 125 >/dev/null
$t kernel elementwise --chip v5e --rows 8192 --cols 2048 --block-rows 512 \
  --svg docs/img/elementwise_v5e.svg --window-us 100 140 >/dev/null
$t kernel gdn-scan-fwd --head-tile-fwd 1 --svg docs/kernels/img/scan_fwd_th1.svg --window-us 300 306 >/dev/null
$t kernel gdn-scan-fwd --head-tile-fwd 8 --svg docs/kernels/img/scan_fwd_th8.svg --window-us 300 306 >/dev/null
$t kernel gdn-invert --tile-n 8 --svg docs/kernels/img/invert_ladder.svg --window-us 300 330 >/dev/null
$t kernel gdn-solve-triangular --svg docs/kernels/img/solve_triangular.svg --window-us 1000 1040 >/dev/null
# Charts: the GDN layer's roofline (docs/cli.md), the GDN knob sweep (docs/sweeps.md);
# docs/img/validation.svg comes with `build/tpusim validate --write`.
$t kernel gdn-layer --build ladder --roofline docs/img/roofline_gdn_ladder_v5e.svg >/dev/null
out=$(mktemp -d)
$t sweep scenarios/sweeps/gdn_knobs.yaml --csv "$out/s.csv" --json "$out/s.json" \
  --plot docs/img/sweep_gdn_knobs.svg >/dev/null
rm -r "$out"
# The generated table in docs/kernels/gdn.md.
table=$($t gdn-builds)
awk -v table="$table" '
  /<!-- BEGIN generated/ { print; print table; skip = 1; next }
  /<!-- END generated/ { skip = 0 }
  !skip' docs/kernels/gdn.md > docs/kernels/gdn.md.tmp && mv docs/kernels/gdn.md.tmp docs/kernels/gdn.md
# GUI screenshots (needs xvfb-run).
G="xvfb-run -a -s '-screen 0 1600x1000x24' build/tpusim-gui"
eval "$G --kernel gdn-scan-fwd --head-tile-fwd 1 --window-us 300 306 --screenshot docs/img/gui_scan_th1.png"
eval "$G --kernel gdn-scan-fwd --head-tile-fwd 8 --window-us 300 306 --screenshot docs/img/gui_scan_th8.png"
eval "$G --kernel gdn-invert --tile-n 8 --window-us 300 330 --screenshot docs/img/gui_ladder.png"
eval "$G --kernel gdn-solve-triangular --window-us 1000 1040 --screenshot docs/img/gui_solve.png"
eval "$G --kernel gdn-invert --compare gdn-solve-triangular --seq 1024 --screenshot docs/img/gui_compare_ladder_solve.png"
eval "$G scenarios/calibration/c1/c1_ladder.yaml --screenshot docs/img/gui_step.png"
eval "$G scenarios/calibration/c1/c1_ladder.yaml --compare-scenario scenarios/calibration/c1/c1_main.yaml --screenshot docs/img/gui_compare_steps.png"
eval "$G tests/data/profile/small_step.yaml --profile tests/data/profile/small_step_trace.json.gz --screenshot docs/img/gui_step_measured.png"
eval "$G --hlo scenarios/compiled/steps/c3_41_v5e_maxtext-16b.hlo.gz --chip v5e --screenshot docs/img/gui_compiled_step.png"
# Scripted: a click on layers 0-2's GDN forward, then on a kernel of it; the scan's critical path.
script=$(mktemp)
printf 'click 200 439\nwait 3\nclick 1475 668\nwait 3\nclick 482 622\nwait 3\nscreenshot docs/img/gui_step_drill.png\n' >"$script"
eval "$G scenarios/calibration/c1/c1_ladder.yaml --script $script"
printf 'click 312 377\nwait 3\nscreenshot docs/img/gui_scan_path.png\n' >"$script"
eval "$G --kernel gdn-scan-fwd --window-us 120 124 --script $script"
printf 'click 312 377\nwait 3\nscreenshot docs/img/gui_solve_path.png\n' >"$script"
eval "$G --kernel gdn-solve-triangular --window-us 104 112 --script $script"
printf 'move 1000 440\nwait 3\nscreenshot docs/img/gui_measured.png\n' >"$script"
eval "$G --hlo tests/data/hlo/gdn_main_path --profile tests/data/profile/gdn_main_path_trace.json.gz --script $script"
rm -f "$script"
eval "$G --kernel gdn-layer --build ladder --screenshot docs/img/gui_ladder_layer_v5e.png"
