#include "sim/timing/engine.h"

#include <fmt/format.h>
#include <pthread.h>
#if defined(__SANITIZE_ADDRESS__)  // gcc
#define TPUSIM_ASAN 1
#elif defined(__has_feature)  // clang
#if __has_feature(address_sanitizer)
#define TPUSIM_ASAN 1
#endif
#endif
#if TPUSIM_ASAN
#include <sanitizer/common_interface_defs.h>
#endif

#include <atomic>
#include <cstdlib>
#include <exception>
#include <limits>
#include <map>
#include <memory>

#include "sim/error.h"
#include "sim/ir/validate.h"
#include "sim/timing/call_cache.h"
#include "sim/timing/collectives.h"
#include "sim/timing/sc_time.h"
#include "sim/timing/steady_state.h"
#include "sim/timing/tensor_core.h"

namespace tpusim {
namespace {

// The megacore split (the chip's megacore_split rule): the grid axis whose indices are dealt to
// the TensorCores, or -1 for none.
int split_axis(const Kernel& k, int cores, MegacoreSplit rule) {
  if (cores < 2) return -1;
  if (rule == MegacoreSplit::leading_parallel)
    for (size_t a = 0; a < k.grid.size(); ++a)
      if (k.semantics[a] == DimSemantics::parallel) return static_cast<int>(a);
  for (size_t a = 0; a < k.grid.size(); ++a)
    if (k.semantics[a] == DimSemantics::parallel && k.grid[a] % cores == 0)
      return static_cast<int>(a);
  for (size_t a = 0; a < k.grid.size(); ++a)
    if (k.semantics[a] == DimSemantics::parallel && k.grid[a] > 1) return static_cast<int>(a);
  return -1;
}

class Chip : public sc_core::sc_module {
 public:
  SC_HAS_PROCESS(Chip);
  Chip(sc_core::sc_module_name name, const ChipSpec& chip, const Program& program, Recorder& rec,
       const SimOptions& options)
      : sc_module(name),
        chip_(chip),
        program_(program),
        rec_(rec),
        hbm_("hbm", chip, rec),
        options_(options),
        steady_(rec, hbm_) {
    for (int c = 0; c < chip.tensorcores; ++c)
      cores_.push_back(
          std::make_unique<TensorCore>(fmt::format("tc{}", c).c_str(), c, chip, rec, hbm_));
    ici_unit_ = rec.add_unit("ici", UnitKind::ici, -1);
    dcn_unit_ = rec.add_unit("dcn", UnitKind::ici, -1);
    host_unit_ = rec.add_unit("host", UnitKind::ici, -1);
    SC_THREAD(run);
  }

  void collect(RunResult& r) {
    r.cycles = end_;
    r.time = cores_[0]->account().time;
    r.hbm_read_bytes = hbm_.read_bytes();
    r.hbm_write_bytes = hbm_.write_bytes();
    r.grid_steps = grid_steps_;
    r.fast_forwarded_steps = fast_forwarded_steps_ + steady_.skipped_steps();
    for (auto& [k, idx] : kernel_index_) {
      (void)k;
      r.flops += counters_[idx].flops;
      r.mxu_pass_flops += counters_[idx].mxu_pass_flops;
      r.kernels[idx].flops = counters_[idx].flops;
      r.kernels[idx].mxu_pass_flops = counters_[idx].mxu_pass_flops;
    }
  }
  std::vector<KernelStats>* stats = nullptr;
  std::vector<ItemResult>* items = nullptr;

  // What stopped the run, rethrown by simulate() once SystemC has returned: an exception must
  // not unwind through SystemC's thread stacks (the sanitizers lose track of them).
  std::exception_ptr failure;

 private:
  void charge_all(Cause c, int64_t until) {
    for (auto& core : cores_) core->account().charge(rec_, c, until);
  }

  void run() {
    try {
      run_program();
    } catch (...) {
      failure = std::current_exception();  // the only process: returning ends the simulation
    }
  }

  void run_program() {
    wait(cycles(chip_.s_to_cycles(chip_.host_dispatch_s)));
    charge_all(Cause::dispatch, now_cycles());
    std::vector<int64_t> done(program_.items.size(), 0);
    // Collectives over one mesh axis share its links and run one after another; different
    // axes use different links (or the DCN) and overlap.
    std::map<std::string, int64_t> link_free;
    int64_t dcn_free = 0, collectives_done = 0;
    for (size_t i = 0; i < program_.items.size(); ++i) {
      const ProgramItem& item = program_.items[i];
      int64_t deps = 0;
      for (int d : item.deps) deps = std::max(deps, done[d]);
      if (const auto* c = std::get_if<Collective>(&item.what)) {
        int64_t& free = c->axis.dcn ? dcn_free : link_free[c->axis.name];
        const int64_t start = std::max({now_cycles(), deps, free});
        free = start + chip_.s_to_cycles(collective_link_seconds(chip_, *c));
        rec_.busy(c->axis.host  ? host_unit_
                  : c->axis.dcn ? dcn_unit_
                                : ici_unit_,
                  start, free, rec_.label(item.name), {.item = static_cast<int>(i)});
        done[i] = free + chip_.s_to_cycles(collective_latency_seconds(chip_, *c));
        (*items)[i].start = start;
        (*items)[i].cycles = done[i] - start;
        collectives_done = std::max(collectives_done, done[i]);
        continue;
      }
      if (deps > now_cycles()) wait(cycles(deps - now_cycles()));
      charge_all(Cause::collective, now_cycles());
      const int64_t t0 = now_cycles();
      if (const auto* call = std::get_if<KernelCall>(&item.what)) {
        run_kernel(static_cast<int>(i), 0, *call->kernel, false);
      } else {
        const Loop& loop = std::get<Loop>(item.what);
        for (int64_t t = 0; t < loop.trips; ++t)
          for (size_t j = 0; j < loop.body.size(); ++j)
            run_kernel(static_cast<int>(i), static_cast<int>(j), *loop.body[j], j == 0);
      }
      done[i] = now_cycles();
      (*items)[i].start = t0;
      (*items)[i].cycles = now_cycles() - t0;
    }
    if (collectives_done > now_cycles()) wait(cycles(collectives_done - now_cycles()));
    charge_all(Cause::collective, now_cycles());
    end_ = now_cycles();
  }

  // Runs one kernel on the TensorCores (split over both on a megacore chip) and waits for it.
  // `body`: the kernel's position in the item (a loop body's index).
  void run_kernel(int item, int body, const Kernel& k, bool loop_iteration) {
    auto [it, fresh] = kernel_index_.emplace(&k, static_cast<int>(stats->size()));
    if (fresh) {
      KernelStats ks;
      ks.name = k.name;
      ks.origin = k.origin;
      ks.grid = k.grid;
      ks.vmem = vmem_usage(k);
      ks.vmem_limit_bytes = k.vmem_limit_bytes > 0 ? k.vmem_limit_bytes : chip_.scoped_vmem_bytes;
      stats->push_back(std::move(ks));
      counters_.emplace_back();
    }
    if ((*items)[item].kernel < 0) (*items)[item].kernel = it->second;
    KernelStats& ks = (*stats)[it->second];
    const auto before = cores_[0]->account().time;
    const int64_t read0 = hbm_.read_bytes(), write0 = hbm_.write_bytes(), t0 = now_cycles();

    calls_begun_steps_ = grid_steps_;
    grid_steps_ += k.grid_steps();
    // A call that starts with HBM idle replays an identical earlier call (call_cache.h): within
    // this run as one span on the timeline, from an earlier run with that call's events.
    const bool idle_start = hbm_.busy_after(t0 + chip_.dma_latency_cycles) <= 0;
    if (options_.fast_forward && idle_start) {
      const CallKey key{kernel_digest(k), chip_digest_, loop_iteration, rec_.keeps_events()};
      std::shared_ptr<const CallRecord> r;
      bool earlier_run = false;
      if (auto found = replays_.find(key); found != replays_.end()) {
        r = found->second;
      } else if ((r = find_call(key))) {
        earlier_run = true;
        replays_.emplace(key, r);
      }
      if (r) {
        replay(*r, t0, k, item, body, earlier_run);
        counters_[it->second].flops += r->flops;
        counters_[it->second].mxu_pass_flops += r->mxu_pass_flops;
        fast_forwarded_steps_ += k.grid_steps();
      } else {
        auto fresh_record = std::make_shared<CallRecord>(snapshot());
        const KernelCounters before_call = counters_[it->second];
        const auto marks = rec_.event_marks();
        play(k, item, body, loop_iteration, it->second, t0);
        record(*fresh_record, t0, marks);
        fresh_record->flops = counters_[it->second].flops - before_call.flops;
        fresh_record->mxu_pass_flops =
            counters_[it->second].mxu_pass_flops - before_call.mxu_pass_flops;
        replays_.emplace(key, fresh_record);
        keep_call(key, std::move(fresh_record));
      }
    } else {
      play(k, item, body, loop_iteration, it->second, t0);
    }
    charge_all(Cause::idle, now_cycles());
    check_events(grid_steps_);  // a replayed call adds its events at once
    if (options_.progress) options_.progress(grid_steps_, program_steps_);

    ks.calls += 1;
    ks.cycles += now_cycles() - t0;
    ks.hbm_read_bytes += hbm_.read_bytes() - read0;
    ks.hbm_write_bytes += hbm_.write_bytes() - write0;
    const auto& after = cores_[0]->account().time;
    for (int c = 0; c < kNumCauses; ++c) ks.time[c] += after[c] - before[c];
  }

  // Runs the kernel on the TensorCores (its grid split over both on a megacore chip) and waits
  // until the last core is done.
  void play(const Kernel& k, int item, int body, bool loop_iteration, int index, int64_t t0) {
    const int axis = split_axis(k, chip_.tensorcores, chip_.megacore_split);
    const int used =
        axis < 0 ? 1 : static_cast<int>(std::min<int64_t>(chip_.tensorcores, k.grid[axis]));
    std::vector<TensorCore*> cores;
    for (int c = 0; c < used; ++c) {
      CoreWork w{&k, item, body, loop_iteration, axis, 0, 0};
      if (axis >= 0) {
        w.lo = k.grid[axis] * c / used;
        w.hi = k.grid[axis] * (c + 1) / used;
      }
      cores_[c]->begin(w, &counters_[index], t0);
      cores.push_back(cores_[c].get());
    }
    // The cores run on their own clocks; the one whose next transfer point is earliest goes
    // next (on a tie the later core: the order in which SystemC resumed the cores when each had
    // its own thread), so HBM sees requests in time order.
    const bool fast_forward = options_.fast_forward;
    if (fast_forward) steady_.begin(cores, &counters_[index], chip_.dma_latency_cycles);
    for (;;) {
      TensorCore* next = nullptr;
      for (TensorCore* c : cores)
        if (c->point() != TensorCore::Point::done && (!next || c->clock() <= next->clock()))
          next = c;
      if (!next) break;
      next->resume();
      if (++transfer_points_ % kWorkCheckInterval == 0) check_work(cores);
      if (fast_forward && next == cores[0] && next->point() == TensorCore::Point::prefetch)
        steady_.observe();
    }
    int64_t end = t0;
    for (TensorCore* c : cores) end = std::max(end, c->clock());
    wait(cycles(end - t0));
  }

  // The timeline's size against its limit, and progress, during a kernel call.
  void check_work(const std::vector<TensorCore*>& cores) {
    int64_t done = calls_begun_steps_;  // and the current call's steps begun on each core
    for (const TensorCore* c : cores) done += c->steps_begun();
    check_events(done);
    if (options_.progress) options_.progress(done, program_steps_);
  }
  void check_events(int64_t steps_done) const {
    const int64_t n = static_cast<int64_t>(rec_.event_count());
    if (n < options_.limits.events) return;
    throw WorkLimitError(fmt::format(
        "the timeline reached {} events, over the limit of {} (--max-events), {:.0f}% into the "
        "program's {} grid steps: record a smaller shape, or raise the limit",
        n, options_.limits.events,
        100.0 * static_cast<double>(steps_done) / static_cast<double>(program_steps_),
        program_steps_));
  }

  // The counters before a call (record() turns them into what the call changed).
  CallRecord snapshot() const {
    CallRecord r;
    for (const auto& core : cores_) r.time.push_back(core->account().time);
    r.busy = rec_.busy_totals();
    r.read = hbm_.read_bytes();
    r.write = hbm_.write_bytes();
    return r;
  }
  void record(CallRecord& r, int64_t t0, const std::vector<size_t>& marks) {
    for (size_t c = 0; c < cores_.size(); ++c) {
      const CoreAccount& a = cores_[c]->account();
      for (int i = 0; i < kNumCauses; ++i) r.time[c][i] = a.time[i] - r.time[c][i];
      r.cursor.push_back(a.cursor - t0);
    }
    const auto& busy = rec_.busy_totals();
    for (size_t u = 0; u < busy.size(); ++u) r.busy[u] = busy[u] - r.busy[u];
    r.read = hbm_.read_bytes() - r.read;
    r.write = hbm_.write_bytes() - r.write;
    r.hbm_busy_after = hbm_.busy_after(t0);
    r.cycles = now_cycles() - t0;
    rec_.events_since(marks, t0, r.events, r.labels);
  }
  // Within a run a replayed call is one span per core; a call from an earlier run (which this
  // run's timeline has not shown yet) brings its events.
  void replay(const CallRecord& r, int64_t t0, const Kernel& k, int item, int body,
              bool with_events) {
    if (with_events) rec_.replay_events(r.events, r.labels, t0, item, body);
    for (size_t c = 0; c < cores_.size(); ++c) {
      CoreAccount& a = cores_[c]->account();
      if (!with_events)
        rec_.fast_forwarded(a.scalar_unit, t0, t0 + r.cursor[c],
                            fmt::format("replayed: {} as its first call", k.name), item);
      for (int i = 0; i < kNumCauses; ++i) a.time[i] += r.time[c][i];
      a.cursor = t0 + r.cursor[c];
    }
    for (size_t u = 0; u < r.busy.size(); ++u) rec_.add_busy(static_cast<int>(u), r.busy[u]);
    hbm_.replay(t0, r.hbm_busy_after, r.read, r.write);
    wait(cycles(r.cycles));
  }
  const Digest& kernel_digest(const Kernel& k) {
    auto [it, fresh] = kernel_digests_.try_emplace(&k);
    if (fresh) it->second = content_hash(k);
    return it->second;
  }

  const ChipSpec& chip_;
  const Program& program_;
  Recorder& rec_;
  Hbm hbm_;
  std::vector<std::unique_ptr<TensorCore>> cores_;
  int ici_unit_ = 0, dcn_unit_ = 0, host_unit_ = 0;
  SimOptions options_;
  SteadyState steady_;
  int64_t end_ = 0;
  std::map<const Kernel*, int> kernel_index_;
  Digest chip_digest_ = content_hash(chip_);
  std::map<const Kernel*, Digest> kernel_digests_;
  std::map<CallKey, std::shared_ptr<const CallRecord>> replays_;  // the calls of this run
  int64_t grid_steps_ = 0, fast_forwarded_steps_ = 0;
  // Work done, for WorkLimits and progress: the program's grid steps, those of the calls before
  // the current one, transfer points resumed.
  int64_t program_steps_ = program_grid_steps(program_), calls_begun_steps_ = 0;
  int64_t transfer_points_ = 0;
  static constexpr int64_t kWorkCheckInterval = 1 << 16;
  std::vector<KernelCounters> counters_;
};

std::atomic<bool> fast_forward_default{true};
// Set once by the command line before any simulation (the GUI's worker thread only reads them).
WorkLimits default_work_limits;
SimProgress default_sim_progress;
std::atomic<int64_t> total_runs{0}, total_steps{0}, total_skipped{0}, total_events{0};

}  // namespace

bool SimOptions::default_fast_forward() { return fast_forward_default; }
WorkLimits SimOptions::default_limits() { return default_work_limits; }
void SimOptions::set_default_limits(const WorkLimits& limits) { default_work_limits = limits; }
SimProgress SimOptions::default_progress() { return default_sim_progress; }
void SimOptions::set_default_progress(SimProgress progress) {
  default_sim_progress = std::move(progress);
}
EngineTotals engine_totals() { return {total_runs, total_steps, total_skipped, total_events}; }
void SimOptions::set_default_fast_forward(bool on) { fast_forward_default = on; }

void validate(const ChipSpec& chip, const Program& program) {
  auto check_kernel = [&](const Kernel& k) {
    check_block_shapes(k);
    const int64_t limit = k.vmem_limit_bytes > 0 ? k.vmem_limit_bytes : chip.scoped_vmem_bytes;
    if (k.vmem_limit_bytes > chip.vmem_bytes)
      throw Error(fmt::format("kernel '{}': vmem_limit_bytes {} exceeds the {} of VMEM on {}",
                              k.name, k.vmem_limit_bytes, format_bytes(chip.vmem_bytes),
                              chip.name));
    check_vmem(k, vmem_usage(k), limit,
               k.vmem_limit_bytes > 0 ? "kernel's vmem_limit_bytes"
                                      : fmt::format("scoped VMEM limit on {}", chip.name));
  };
  for (const ProgramItem& item : program.items) {
    if (const auto* call = std::get_if<KernelCall>(&item.what)) check_kernel(*call->kernel);
    if (const auto* loop = std::get_if<Loop>(&item.what))
      for (const auto& k : loop->body) check_kernel(*k);
    if (const auto* c = std::get_if<Collective>(&item.what))
      if (c->axis.size < 1 || c->bytes < 0)
        throw Error(fmt::format("collective '{}': axis '{}' of size {} with {} bytes", item.name,
                                c->axis.name, c->axis.size, c->bytes));
  }
}

int64_t program_grid_steps(const Program& program) {
  int64_t n = 0;
  auto add = [&n](int64_t steps) {
    if (__builtin_add_overflow(n, steps, &n)) n = std::numeric_limits<int64_t>::max();
  };
  for (const ProgramItem& item : program.items) {
    if (const auto* call = std::get_if<KernelCall>(&item.what)) add(call->kernel->grid_steps());
    if (const auto* loop = std::get_if<Loop>(&item.what))
      for (const auto& k : loop->body) {
        int64_t steps = 0;
        if (__builtin_mul_overflow(loop->trips, k->grid_steps(), &steps))
          steps = std::numeric_limits<int64_t>::max();
        add(steps);
      }
  }
  return n;
}

void check_work(const Program& program, const WorkLimits& limits) {
  const int64_t steps = program_grid_steps(program);
  if (steps <= limits.grid_steps) return;
  throw WorkLimitError(fmt::format(
      "{} has {} grid steps, more than the limit of {} (--max-grid-steps): use larger blocks or "
      "a smaller shape, or raise the limit",
      program.name.empty() ? "the program" : "'" + shortened(program.name) + "'", steps,
      limits.grid_steps));
}

namespace {

#if TPUSIM_ASAN
// SystemC announces its switches between thread stacks to AddressSanitizer, but announces the
// switch back to the caller of sc_start() with an empty stack, and a finished thread's last
// switch not at all; ASan then ignores the real stack's bounds and reports false stack errors at
// the next exception. This announces the calling thread's real stack again.
void announce_own_stack_to_asan() {
  pthread_attr_t attr;
  void* bottom = nullptr;
  size_t size = 0;
  if (pthread_getattr_np(pthread_self(), &attr) != 0) return;
  pthread_attr_getstack(&attr, &bottom, &size);
  pthread_attr_destroy(&attr);
  void* fake_stack = nullptr;
  __sanitizer_start_switch_fiber(&fake_stack, bottom, size);
  __sanitizer_finish_switch_fiber(fake_stack, nullptr, nullptr);
}
#else
void announce_own_stack_to_asan() {}
#endif

// A fresh SystemC kernel for one run (environment.md): runs do not see each other's modules or
// time. Deleted however the run ends.
class SimContext {
 public:
  SimContext() : context_(new sc_core::sc_simcontext()) {
    sc_core::sc_curr_simcontext = context_;
    sc_core::sc_default_global_context = context_;
    sc_core::sc_set_time_resolution(1, sc_core::SC_PS);
  }
  ~SimContext() {
    sc_core::sc_curr_simcontext = nullptr;
    sc_core::sc_default_global_context = nullptr;
    delete context_;
  }
  SimContext(const SimContext&) = delete;
  SimContext& operator=(const SimContext&) = delete;

 private:
  sc_core::sc_simcontext* context_;
};

}  // namespace

RunResult simulate(const ChipSpec& chip, const Program& program, const SimOptions& options) {
  validate(chip, program);
  check_work(program, options.limits);
  setenv("SYSTEMC_DISABLE_COPYRIGHT_MESSAGE", "1", 0);

  RunResult r;
  r.chip = chip.name;
  r.clock_hz = chip.clock_hz;
  r.peak_flops = chip.peak_bf16_flops;
  Recorder rec(options.record_timeline);
  {
    SimContext context;
    Chip top("chip", chip, program, rec, options);
    top.stats = &r.kernels;
    for (const ProgramItem& item : program.items)
      r.items.push_back({.name = item.name,
                         .stage = item.stage.empty() ? item.name : item.stage,
                         .deps = item.deps});
    top.items = &r.items;
    sc_core::sc_start();
    announce_own_stack_to_asan();
    if (top.failure) std::rethrow_exception(top.failure);
    top.collect(r);
  }
  rec.move_into(r);
  r.time_s = chip.cycles_to_s(r.cycles);
  total_runs += 1;
  total_steps += r.grid_steps;
  total_skipped += r.fast_forwarded_steps;
  total_events += static_cast<int64_t>(r.events.size());
  for (const KernelStats& k : r.kernels)
    r.vmem_peak_bytes = std::max(r.vmem_peak_bytes, k.vmem.total_bytes);
  return r;
}

RunResult simulate_kernel(const ChipSpec& chip, std::shared_ptr<const Kernel> kernel,
                          const SimOptions& options) {
  Program p;
  p.name = kernel->name;
  p.add_kernel(std::move(kernel));
  return simulate(chip, p, options);
}

}  // namespace tpusim
