// A per-kernel timeline of one run (kernel_bench --timeline): CUPTI's activity records of every
// kernel `run` launches, graph nodes included, with start and end on the GPU's clock, stream,
// grid and registers, printed in start order. What two streams do to each other (the shared
// expert's side branch beside the routed experts) is invisible to event timing and to ncu, which
// serializes kernels; this shows it without nsys.
#include <cxxabi.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "bench_util.h"

#ifdef TANDEM_WITH_CUPTI
#include <cupti.h>
#endif

namespace tandem::bench {

#ifdef TANDEM_WITH_CUPTI
namespace {

std::vector<KernelRecord>& records() {
  static std::vector<KernelRecord> r;
  return r;
}

// The function's name without namespaces, template arguments or parameters.
std::string short_name(const char* mangled) {
  int status = 0;
  char* d = abi::__cxa_demangle(mangled, nullptr, nullptr, &status);
  std::string s = status == 0 && d ? d : mangled;
  std::free(d);
  // Cut the parameter list and template arguments (outermost first), then the qualifiers.
  int depth = 0;
  std::string flat;
  for (char ch : s) {
    if (ch == '<' || ch == '(') ++depth;
    if (depth == 0) flat += ch;
    if ((ch == '>' || ch == ')') && depth > 0) --depth;
  }
  const size_t sp = flat.rfind(' ');  // a return type before the name
  if (sp != std::string::npos) flat = flat.substr(sp + 1);
  const size_t q = flat.rfind("::");
  return q == std::string::npos ? flat : flat.substr(q + 2);
}

void CUPTIAPI buffer_requested(uint8_t** buffer, size_t* size, size_t* max_records) {
  constexpr size_t kBytes = size_t{8} << 20;
  *buffer = static_cast<uint8_t*>(std::aligned_alloc(8, kBytes));
  *size = kBytes;
  *max_records = 0;
}

void CUPTIAPI buffer_completed(CUcontext, uint32_t, uint8_t* buffer, size_t, size_t valid) {
  CUpti_Activity* rec = nullptr;
  while (cuptiActivityGetNextRecord(buffer, valid, &rec) == CUPTI_SUCCESS) {
    if (rec->kind != CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL &&
        rec->kind != CUPTI_ACTIVITY_KIND_KERNEL)
      continue;
    const auto* k = reinterpret_cast<const CUpti_ActivityKernel10*>(rec);
    KernelRecord r;
    r.start = k->start, r.end = k->end, r.stream = k->streamId;
    r.blocks = static_cast<int64_t>(k->gridX) * k->gridY * k->gridZ;
    r.threads = k->blockX * k->blockY * k->blockZ;
    r.regs = k->registersPerThread;
    r.name = short_name(k->name);
    records().push_back(std::move(r));
  }
  std::free(buffer);
}

bool cupti_ok(CUptiResult r, const char* what) {
  if (r == CUPTI_SUCCESS) return true;
  const char* msg = nullptr;
  cuptiGetResultString(r, &msg);
  std::printf("timeline: %s failed: %s\n", what, msg ? msg : "?");
  return false;
}

}  // namespace

bool record_kernels(const std::function<void()>& run, std::vector<KernelRecord>& out) {
  records().clear();
  out.clear();
  if (!cupti_ok(cuptiActivityRegisterCallbacks(buffer_requested, buffer_completed),
                "cuptiActivityRegisterCallbacks") ||
      !cupti_ok(cuptiActivityEnable(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL),
                "cuptiActivityEnable")) {
    run();
    return false;
  }
  run();
  CK(cudaDeviceSynchronize());
  cuptiActivityFlushAll(1);
  cuptiActivityDisable(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL);
  out.swap(records());
  std::sort(out.begin(), out.end(),
            [](const KernelRecord& a, const KernelRecord& b) { return a.start < b.start; });
  return true;
}

void print_kernel_timeline(const std::function<void()>& run, const std::string& title) {
  std::vector<KernelRecord> r;
  if (!record_kernels(run, r)) return;
  if (r.empty()) {
    std::printf("timeline %s: no kernel records\n", title.c_str());
    return;
  }
  const uint64_t t0 = r.front().start;
  uint64_t t_end = 0;
  std::map<uint32_t, double> busy;  // per stream: the sum of its kernels' durations
  for (const KernelRecord& k : r) t_end = std::max(t_end, k.end);
  std::printf("timeline %s: %zu kernels, %.1f us from the first start to the last end\n",
              title.c_str(), r.size(), (t_end - t0) / 1e3);
  std::printf("%8s %8s %8s %6s %7s %5s %4s  %s\n", "start us", "end us", "dur us", "stream",
              "blocks", "thr", "regs", "kernel");
  for (const KernelRecord& k : r) {
    busy[k.stream] += (k.end - k.start) / 1e3;
    std::printf("%8.1f %8.1f %8.1f %6u %7lld %5d %4d  %s\n", (k.start - t0) / 1e3,
                (k.end - t0) / 1e3, (k.end - k.start) / 1e3, k.stream,
                static_cast<long long>(k.blocks), k.threads, k.regs, k.name.c_str());
  }
  for (const auto& [stream, us] : busy)
    std::printf("  stream %u: kernels busy %.1f us\n", stream, us);
  std::printf("\n");
}

#else

bool record_kernels(const std::function<void()>& run, std::vector<KernelRecord>& out) {
  out.clear();
  run();
  std::printf("kernel records: built without CUPTI\n");
  return false;
}

void print_kernel_timeline(const std::function<void()>& run, const std::string& title) {
  run();
  std::printf("timeline %s: kernel_bench was built without CUPTI\n", title.c_str());
}

#endif

}  // namespace tandem::bench
