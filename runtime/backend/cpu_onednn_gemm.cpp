// OnednnGemm (cpu_onednn_gemm.hpp): a per-thread list of matmul primitives, executed
// through oneDNN's C API with the arguments on the stack (the C++ execute() builds a
// std::unordered_map per call).
#include "runtime/backend/cpu_onednn_gemm.hpp"

#include <cpuid.h>
#include <omp.h>

#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>
#include <oneapi/dnnl/dnnl.hpp>
#include <stdexcept>
#include <vector>

namespace dseek::backend {

namespace {

using dnnl::memory;

std::string shape_text(const GemmShape& s) {
  return std::string(s.type == GemmType::bf16 ? "bf16" : "fp32") + " M=" + std::to_string(s.M) +
         " N=" + std::to_string(s.N) + " K=" + std::to_string(s.K) + " a strides (" +
         std::to_string(s.a_row) + "," + std::to_string(s.a_col) + ") b strides (" +
         std::to_string(s.b_row) + "," + std::to_string(s.b_col) + ") ldc " +
         std::to_string(s.c_row) + (s.bias ? " +bias" : "") + (s.accumulate ? " +=" : "") +
         (s.packed_b ? " packed" : "");
}

const char* isa_name(dnnl_cpu_isa_t isa) {
  switch (isa) {
    case dnnl_cpu_isa_sse41: return "sse41";
    case dnnl_cpu_isa_avx: return "avx";
    case dnnl_cpu_isa_avx2: return "avx2";
    case dnnl_cpu_isa_avx2_vnni: return "avx2_vnni";
    case dnnl_cpu_isa_avx512_core: return "avx512_core";
    case dnnl_cpu_isa_avx512_core_vnni: return "avx512_core_vnni";
    case dnnl_cpu_isa_avx512_core_bf16: return "avx512_core_bf16 (AVX-512 BF16)";
    case dnnl_cpu_isa_avx512_core_amx: return "avx512_core_amx (AMX)";
    default: return "other";
  }
}

// oneDNN takes each pool thread's OpenMP setting: one thread, so that it runs inside our
// chunk instead of starting an OpenMP team that would spin against our pool.
void single_threaded_here() {
  thread_local const bool done = [] {
    omp_set_num_threads(1);
    return true;
  }();
  (void)done;
}

void check(dnnl_status_t status, const char* what) {
  if (status != dnnl_success)
    throw std::runtime_error(std::string("oneDNN ") + what + " failed (status " +
                             std::to_string(static_cast<int>(status)) + ")");
}

}  // namespace

struct OnednnGemm::Entry {
  GemmShape shape;
  dnnl::matmul primitive;
  memory a, b, c, bias, scratchpad;
  std::string implementation;
  // packed_b only: b's strided layout, the reorder into the primitive's, and its buffer.
  memory b_plain;
  dnnl::reorder pack;
  std::vector<char> packed;
};

struct OnednnGemm::Impl {
  struct Thread {
    dnnl::stream stream;
    std::vector<Entry> entries;
    std::vector<char> scratch;  // the largest scratchpad of this thread's primitives
  };

  dnnl::engine engine{dnnl::engine::kind::cpu, 0};
  std::vector<Thread> threads;
  mutable std::mutex mutex;  // entries grow under it; report() reads under it

  Entry& create(Thread& thread, const GemmShape& s) {
    const auto type = s.type == GemmType::bf16 ? memory::data_type::bf16 : memory::data_type::f32;
    const memory::desc a({s.M, s.K}, type, memory::dims{s.a_row, s.a_col});
    const memory::desc b_plain({s.K, s.N}, type, memory::dims{s.b_row, s.b_col});
    const memory::desc b = s.packed_b ? memory::desc({s.K, s.N}, type, memory::format_tag::any)
                                      : b_plain;
    const memory::desc c({s.M, s.N}, memory::data_type::f32, memory::dims{s.c_row, 1});
    const memory::desc bias({1, s.N}, memory::data_type::f32, memory::dims{s.N, 1});
    dnnl::primitive_attr attr;
    attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);
    if (s.accumulate) {
      dnnl::post_ops ops;
      ops.append_sum(1.0f);
      attr.set_post_ops(ops);
    }
    Entry entry;
    entry.shape = s;
    try {
      const auto desc = s.bias ? dnnl::matmul::desc(a, b, bias, c) : dnnl::matmul::desc(a, b, c);
      const dnnl::matmul::primitive_desc pd(desc, attr, engine);
      entry.primitive = dnnl::matmul(pd);
      entry.implementation = pd.impl_info_str();
      entry.a = memory(a, engine, DNNL_MEMORY_NONE);
      entry.b = memory(pd.weights_desc(), engine, DNNL_MEMORY_NONE);
      if (s.packed_b) {
        entry.b_plain = memory(b_plain, engine, DNNL_MEMORY_NONE);
        entry.pack = dnnl::reorder(entry.b_plain, entry.b);  // its buffer: pack_b's
      }
      entry.c = memory(c, engine, DNNL_MEMORY_NONE);
      entry.bias = memory(bias, engine, DNNL_MEMORY_NONE);
      entry.scratchpad = memory(pd.scratchpad_desc(), engine, DNNL_MEMORY_NONE);
      if (thread.scratch.size() < pd.scratchpad_desc().get_size())
        thread.scratch.resize(pd.scratchpad_desc().get_size());
    } catch (const dnnl::error& e) {
      throw std::runtime_error("oneDNN has no matmul for " + shape_text(s) + ": " + e.what());
    }
    std::lock_guard lock(mutex);
    thread.entries.push_back(std::move(entry));
    return thread.entries.back();
  }
};

OnednnGemm::OnednnGemm(int threads) : impl_(std::make_unique<Impl>()) {
  impl_->threads.resize(static_cast<size_t>(threads));
  for (auto& thread : impl_->threads) thread.stream = dnnl::stream(impl_->engine);
}

OnednnGemm::~OnednnGemm() = default;

OnednnGemm::Entry& OnednnGemm::entry(int thread_index, const GemmShape& shape) {
  single_threaded_here();
  auto& thread = impl_->threads.at(static_cast<size_t>(thread_index));
  for (auto& candidate : thread.entries)
    if (candidate.shape == shape) return candidate;
  return impl_->create(thread, shape);
}

const void* OnednnGemm::pack_b(int thread_index, GemmShape shape, const void* b) {
  shape.packed_b = true;
  Entry& e = entry(thread_index, shape);
  if (e.packed.empty()) e.packed.resize(e.b.get_desc().get_size());  // first use only
  check(dnnl_memory_set_data_handle(e.b_plain.get(), const_cast<void*>(b)), "set_data_handle");
  check(dnnl_memory_set_data_handle(e.b.get(), e.packed.data()), "set_data_handle");
  dnnl_exec_arg_t args[2] = {{DNNL_ARG_FROM, e.b_plain.get()}, {DNNL_ARG_TO, e.b.get()}};
  auto& stream = impl_->threads[static_cast<size_t>(thread_index)].stream;
  check(dnnl_primitive_execute(e.pack.get(), stream.get(), 2, args), "weights reorder");
  return e.packed.data();
}

void OnednnGemm::run(int thread_index, const GemmShape& shape, const void* a, const void* b,
                     float* c, const float* bias) {
  Entry* entry = &this->entry(thread_index, shape);
  auto& thread = impl_->threads[static_cast<size_t>(thread_index)];
  check(dnnl_memory_set_data_handle(entry->a.get(), const_cast<void*>(a)), "set_data_handle");
  check(dnnl_memory_set_data_handle(entry->b.get(), const_cast<void*>(b)), "set_data_handle");
  check(dnnl_memory_set_data_handle(entry->c.get(), c), "set_data_handle");
  check(dnnl_memory_set_data_handle(entry->scratchpad.get(), thread.scratch.data()),
        "set_data_handle");
  dnnl_exec_arg_t args[5] = {{DNNL_ARG_SRC, entry->a.get()},
                             {DNNL_ARG_WEIGHTS, entry->b.get()},
                             {DNNL_ARG_DST, entry->c.get()},
                             {DNNL_ARG_SCRATCHPAD, entry->scratchpad.get()},
                             {DNNL_ARG_BIAS, entry->bias.get()}};
  int count = 4;
  if (shape.bias) {
    check(dnnl_memory_set_data_handle(entry->bias.get(), const_cast<float*>(bias)),
          "set_data_handle");
    count = 5;
  }
  check(dnnl_primitive_execute(entry->primitive.get(), thread.stream.get(), count, args),
        "matmul execute");
}

namespace {
bool amd_cpu() {
  unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
  if (__get_cpuid(0, &eax, &ebx, &ecx, &edx) == 0) return false;
  char vendor[13] = {};
  std::memcpy(vendor, &ebx, 4);
  std::memcpy(vendor + 4, &edx, 4);
  std::memcpy(vendor + 8, &ecx, 4);
  return std::strcmp(vendor, "AuthenticAMD") == 0;
}

// The ISA values are nested bit sets.
bool dispatches_to(dnnl_cpu_isa_t wanted) {
  const auto isa = static_cast<unsigned>(dnnl_get_effective_cpu_isa());
  return (isa & static_cast<unsigned>(wanted)) == static_cast<unsigned>(wanted);
}
}  // namespace

bool OnednnGemm::native_bf16() {
  if (const char* forced = std::getenv("DSEEK_CPU_BF16_GEMM")) {
    if (std::strcmp(forced, "onednn") == 0) {
      // oneDNN's bf16 GEMMs need AVX-512 (emulated there, native with AVX-512 BF16 or AMX).
      if (!dispatches_to(dnnl_cpu_isa_avx512_core))
        throw std::runtime_error(std::string("DSEEK_CPU_BF16_GEMM=onednn: oneDNN has no bf16 "
                                             "GEMM on this CPU (isa ") +
                                 isa_name(dnnl_get_effective_cpu_isa()) +
                                 "; it needs AVX-512): unset it, or set it to sgemm");
      return true;
    }
    if (std::strcmp(forced, "sgemm") == 0) return false;
  }
  if (dispatches_to(dnnl_cpu_isa_avx512_core_amx)) return true;
  return dispatches_to(dnnl_cpu_isa_avx512_core_bf16) && amd_cpu();
}

std::string OnednnGemm::report() const {
  const dnnl_version_t* v = dnnl_version();
  std::string text = "oneDNN " + std::to_string(v->major) + "." + std::to_string(v->minor) +
                     "." + std::to_string(v->patch) + ", isa " +
                     isa_name(dnnl_get_effective_cpu_isa());
  std::map<std::string, int> counts;
  {
    std::lock_guard lock(impl_->mutex);
    for (const auto& thread : impl_->threads)
      for (const auto& entry : thread.entries)
        ++counts[std::string(entry.shape.type == GemmType::bf16 ? "bf16 " : "fp32 ") +
                 entry.implementation];
  }
  const char* separator = ": ";
  for (const auto& [name, n] : counts) {
    text += separator + name + " x" + std::to_string(n);
    separator = ", ";
  }
  return text;
}

}  // namespace dseek::backend
