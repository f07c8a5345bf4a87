// CublasLtGemm (cublaslt_gemm.hpp): each product is described once in cuBLAS's
// column-major terms and run through one cublasLtMatmul path.
//
// Row-major to column-major: a row-major (R, K) array is the column-major (K, R) array
// with leading dimension K, so a row-major product out = x @ y^T is computed as the
// column-major out^T = y @ x^T, swapping the operands instead of copying them.
#include "gpu/cublaslt_gemm.hpp"

#include <cstdint>
#include <stdexcept>
#include <string>

#include "gpu/cuda_check.hpp"

namespace dseek::gpu {

namespace {

// cuBLAS recommends 32 MiB of workspace on Hopper; Ampere needs less but runs with it.
constexpr size_t kWorkspaceBytes = 32u << 20;

cudaDataType fp8_output_type(Fp8Output type) {
  switch (type) {
    case Fp8Output::fp32: return CUDA_R_32F;
    case Fp8Output::bf16: return CUDA_R_16BF;
    case Fp8Output::e4m3: return CUDA_R_8F_E4M3;
    case Fp8Output::e5m2: return CUDA_R_8F_E5M2;
  }
  throw std::invalid_argument("CublasLtGemm: unknown FP8 output type");
}

bool is_fp8(cudaDataType type) { return type == CUDA_R_8F_E4M3 || type == CUDA_R_8F_E5M2; }

void require_positive(int N, int C, int OC, const char* what) {
  if (N <= 0 || C <= 0 || OC <= 0)
    throw std::invalid_argument(std::string("CublasLtGemm::") + what + ": N=" +
                                std::to_string(N) + ", C=" + std::to_string(C) + ", OC=" +
                                std::to_string(OC) + " must all be positive");
}

// Destroys cuBLASLt descriptors at scope exit, also when a check throws.
struct Descriptors {
  cublasLtMatmulDesc_t operation = nullptr;
  cublasLtMatrixLayout_t a = nullptr, b = nullptr, c = nullptr, d = nullptr;
  cublasLtMatmulPreference_t preference = nullptr;
  ~Descriptors() {
    if (preference) cublasLtMatmulPreferenceDestroy(preference);
    if (d) cublasLtMatrixLayoutDestroy(d);
    if (c) cublasLtMatrixLayoutDestroy(c);
    if (b) cublasLtMatrixLayoutDestroy(b);
    if (a) cublasLtMatrixLayoutDestroy(a);
    if (operation) cublasLtMatmulDescDestroy(operation);
  }
};

}  // namespace

// One cublasLtMatmul, column-major: D (m, n) = op(A) (m, k) @ op(B) (k, n) + beta C.
struct CublasLtGemm::Product {
  cublasOperation_t transa = CUBLAS_OP_N, transb = CUBLAS_OP_N;
  int m = 0, n = 0, k = 0;
  const void* A = nullptr;
  cudaDataType a_type = CUDA_R_16BF;
  int lda = 0;
  const void* B = nullptr;
  cudaDataType b_type = CUDA_R_16BF;
  int ldb = 0;
  void* D = nullptr;
  cudaDataType d_type = CUDA_R_32F;
  int ldd = 0;
  // C is D (same memory and layout); its type is D's except for an fp8 D, whose C must
  // be bf16 and is passed as null (never read: fp8 outputs do not accumulate, beta = 0).
  float beta = 0.0f;
  const void* bias = nullptr;  // length m, epilogue BIAS
  cudaDataType bias_type = CUDA_R_32F;
  const float* a_scale = nullptr;
  const float* b_scale = nullptr;
  const float* d_scale = nullptr;
  float* amax_d = nullptr;
  bool fast_accumulation = false;  // FP8 only
};

CublasLtGemm::CublasLtGemm(int device_index, cudaStream_t stream)
    : device_index_(device_index), stream_(stream) {
  DSEEK_CUDA_CHECK(cudaSetDevice(device_index));
  cudaDeviceProp prop{};
  DSEEK_CUDA_CHECK(cudaGetDeviceProperties(&prop, device_index));
  compute_major_ = prop.major;
  device_name_ = std::string(prop.name) + " (sm_" + std::to_string(prop.major) +
                 std::to_string(prop.minor) + ")";
  DSEEK_CUBLAS_CHECK(cublasLtCreate(&handle_));
  workspace_bytes_ = kWorkspaceBytes;
  const cudaError_t status = cudaMalloc(&workspace_, workspace_bytes_);
  if (status != cudaSuccess) {
    cublasLtDestroy(handle_);
    DSEEK_CUDA_CHECK(status);
  }
}

CublasLtGemm::~CublasLtGemm() {
  // Destructors do not throw: a failure here has nothing left to report to.
  cudaFree(workspace_);
  cublasLtDestroy(handle_);
}

void CublasLtGemm::run(const Product& p) {
  DSEEK_CUDA_CHECK(cudaSetDevice(device_index_));
  Descriptors desc;
  DSEEK_CUBLAS_CHECK(cublasLtMatmulDescCreate(&desc.operation, CUBLAS_COMPUTE_32F, CUDA_R_32F));
  auto set = [&](cublasLtMatmulDescAttributes_t attribute, const auto& value) {
    DSEEK_CUBLAS_CHECK(
        cublasLtMatmulDescSetAttribute(desc.operation, attribute, &value, sizeof(value)));
  };
  set(CUBLASLT_MATMUL_DESC_TRANSA, p.transa);
  set(CUBLASLT_MATMUL_DESC_TRANSB, p.transb);
  if (p.bias != nullptr) {
    const cublasLtEpilogue_t epilogue = CUBLASLT_EPILOGUE_BIAS;
    const int32_t bias_type = p.bias_type;
    set(CUBLASLT_MATMUL_DESC_EPILOGUE, epilogue);
    set(CUBLASLT_MATMUL_DESC_BIAS_POINTER, p.bias);
    set(CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE, bias_type);
  }
  if (p.a_scale != nullptr) set(CUBLASLT_MATMUL_DESC_A_SCALE_POINTER, p.a_scale);
  if (p.b_scale != nullptr) set(CUBLASLT_MATMUL_DESC_B_SCALE_POINTER, p.b_scale);
  if (p.d_scale != nullptr) set(CUBLASLT_MATMUL_DESC_D_SCALE_POINTER, p.d_scale);
  if (p.amax_d != nullptr) set(CUBLASLT_MATMUL_DESC_AMAX_D_POINTER, p.amax_d);
  if (p.fast_accumulation) set(CUBLASLT_MATMUL_DESC_FAST_ACCUM, int8_t{1});

  const bool a_transposed = p.transa != CUBLAS_OP_N;
  const bool b_transposed = p.transb != CUBLAS_OP_N;
  const cudaDataType c_type = is_fp8(p.d_type) ? CUDA_R_16BF : p.d_type;
  DSEEK_CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&desc.a, p.a_type, a_transposed ? p.k : p.m,
                                                a_transposed ? p.m : p.k, p.lda));
  DSEEK_CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&desc.b, p.b_type, b_transposed ? p.n : p.k,
                                                b_transposed ? p.k : p.n, p.ldb));
  DSEEK_CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&desc.c, c_type, p.m, p.n, p.ldd));
  DSEEK_CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&desc.d, p.d_type, p.m, p.n, p.ldd));

  // The chosen algorithm depends on everything that shapes the call, pointers aside.
  std::string key = std::to_string(p.transa);
  for (long long field :
       {static_cast<long long>(p.transb), static_cast<long long>(p.m),
        static_cast<long long>(p.n), static_cast<long long>(p.k),
        static_cast<long long>(p.a_type), static_cast<long long>(p.b_type),
        static_cast<long long>(p.d_type), static_cast<long long>(p.lda),
        static_cast<long long>(p.ldb), static_cast<long long>(p.ldd),
        static_cast<long long>(p.bias != nullptr), static_cast<long long>(p.bias_type),
        static_cast<long long>(p.beta != 0.0f), static_cast<long long>(p.a_scale != nullptr),
        static_cast<long long>(p.d_scale != nullptr),
        static_cast<long long>(p.amax_d != nullptr),
        static_cast<long long>(p.fast_accumulation)}) {
    key += ',';
    key += std::to_string(field);
  }
  auto found = algorithms_.find(key);
  if (found == algorithms_.end()) {
    DSEEK_CUBLAS_CHECK(cublasLtMatmulPreferenceCreate(&desc.preference));
    DSEEK_CUBLAS_CHECK(cublasLtMatmulPreferenceSetAttribute(
        desc.preference, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &workspace_bytes_,
        sizeof(workspace_bytes_)));
    cublasLtMatmulHeuristicResult_t heuristic{};
    int returned = 0;
    DSEEK_CUBLAS_CHECK(cublasLtMatmulAlgoGetHeuristic(handle_, desc.operation, desc.a, desc.b,
                                                      desc.c, desc.d, desc.preference, 1,
                                                      &heuristic, &returned));
    if (returned == 0)
      throw std::runtime_error("CublasLtGemm: cuBLASLt has no algorithm for m=" +
                               std::to_string(p.m) + " n=" + std::to_string(p.n) + " k=" +
                               std::to_string(p.k) + " (types/layout key " + key + ") on " +
                               device_name_);
    found = algorithms_.emplace(key, heuristic.algo).first;
  }
  const float alpha = 1.0f;
  // C is D, read only when beta != 0. An fp8 output never accumulates (beta = 0) and its C
  // layout is bf16, not D's type: passing D's memory there would describe one buffer two
  // ways (cuBLASLt's in-place rule wants Cdesc == Ddesc), so C is null, as Transformer
  // Engine passes it for fp8 outputs.
  const void* c_pointer = is_fp8(p.d_type) ? nullptr : p.D;
  const cublasStatus_t status =
      cublasLtMatmul(handle_, desc.operation, &alpha, p.A, desc.a, p.B, desc.b, &p.beta,
                     c_pointer, desc.c, p.D, desc.d, &found->second, workspace_,
                     workspace_bytes_, stream_);
  // cuBLASLt's status alone ("not supported") does not say which product: name it.
  if (status != CUBLAS_STATUS_SUCCESS)
    check_cublas(status, __FILE__, __LINE__, ("cublasLtMatmul of " + describe(p)).c_str());
}

std::string CublasLtGemm::describe(const Product& p) {
  const auto type_name = [](cudaDataType type) -> std::string {
    switch (type) {
      case CUDA_R_32F: return "fp32";
      case CUDA_R_16BF: return "bf16";
      case CUDA_R_8F_E4M3: return "e4m3";
      case CUDA_R_8F_E5M2: return "e5m2";
      default: return "type " + std::to_string(static_cast<int>(type));
    }
  };
  // A pointer's alignment: cuBLASLt's kernels need 16 bytes, its heuristic assumes 256.
  const auto alignment = [](const void* pointer) {
    const auto address = reinterpret_cast<uintptr_t>(pointer);
    return address == 0 ? std::string("null")
                        : std::to_string(address & ~(address - 1) > 256 ? 256
                                                                         : address & ~(address - 1));
  };
  return "D (" + std::to_string(p.m) + " x " + std::to_string(p.n) + ", " +
         type_name(p.d_type) + ", ld " + std::to_string(p.ldd) + ", aligned " +
         alignment(p.D) + ") = " + (p.transa == CUBLAS_OP_N ? "A" : "A^T") + " (" +
         type_name(p.a_type) + ", ld " + std::to_string(p.lda) + ", aligned " +
         alignment(p.A) + ") @ " + (p.transb == CUBLAS_OP_N ? "B" : "B^T") + " (" +
         type_name(p.b_type) + ", ld " + std::to_string(p.ldb) + ", aligned " +
         alignment(p.B) + "), k " + std::to_string(p.k) + ", beta " + std::to_string(p.beta) +
         (p.bias != nullptr ? ", bias " + type_name(p.bias_type) : std::string(", no bias")) +
         (p.a_scale != nullptr ? ", scales aligned " + alignment(p.a_scale) + " and " +
                                     alignment(p.b_scale)
                               : std::string()) + (p.d_scale != nullptr ? ", d_scale" : "") +
         (p.amax_d != nullptr ? ", amax_d" : "") +
         (p.fast_accumulation ? ", fast accumulation" : "") + " on " + device_name_;
}

// --- BF16 ------------------------------------------------------------------------------

namespace {

// out^T (OC, N) = w (OC, C; stored as column-major (C, OC), transposed) @ inp^T (C, N).
template <class Out>
void describe_bf16_forward(CublasLtGemm::Product& p, Out* out, const bf16* inp, const bf16* w,
                           const Out* bias, int N, int C, int OC, cudaDataType out_type) {
  p.transa = CUBLAS_OP_T;
  p.transb = CUBLAS_OP_N;
  p.m = OC, p.n = N, p.k = C;
  p.A = w, p.a_type = CUDA_R_16BF, p.lda = C;
  p.B = inp, p.b_type = CUDA_R_16BF, p.ldb = C;
  p.D = out, p.d_type = out_type, p.ldd = OC;
  p.bias = bias, p.bias_type = out_type;
}

// dinp^T (C, N) = w^T (C, OC; w stored as column-major (C, OC)) @ dout^T (OC, N).
template <class Out>
void describe_bf16_backward_input(CublasLtGemm::Product& p, Out* dinp, const bf16* dout,
                                  const bf16* w, int N, int C, int OC, cudaDataType out_type) {
  p.transa = CUBLAS_OP_N;
  p.transb = CUBLAS_OP_N;
  p.m = C, p.n = N, p.k = OC;
  p.A = w, p.a_type = CUDA_R_16BF, p.lda = C;
  p.B = dout, p.b_type = CUDA_R_16BF, p.ldb = OC;
  p.D = dinp, p.d_type = out_type, p.ldd = C;
}

}  // namespace

void CublasLtGemm::bf16_forward(float* out, const bf16* inp, const bf16* w, const float* bias,
                                int N, int C, int OC) {
  require_positive(N, C, OC, "bf16_forward");
  Product p;
  describe_bf16_forward(p, out, inp, w, bias, N, C, OC, CUDA_R_32F);
  run(p);
}

void CublasLtGemm::bf16_forward(bf16* out, const bf16* inp, const bf16* w, const bf16* bias,
                                int N, int C, int OC) {
  require_positive(N, C, OC, "bf16_forward");
  Product p;
  describe_bf16_forward(p, out, inp, w, bias, N, C, OC, CUDA_R_16BF);
  run(p);
}

void CublasLtGemm::bf16_backward_input(float* dinp, const bf16* dout, const bf16* w, int N,
                                       int C, int OC) {
  require_positive(N, C, OC, "bf16_backward_input");
  Product p;
  describe_bf16_backward_input(p, dinp, dout, w, N, C, OC, CUDA_R_32F);
  run(p);
}

void CublasLtGemm::bf16_backward_input(bf16* dinp, const bf16* dout, const bf16* w, int N,
                                       int C, int OC) {
  require_positive(N, C, OC, "bf16_backward_input");
  Product p;
  describe_bf16_backward_input(p, dinp, dout, w, N, C, OC, CUDA_R_16BF);
  run(p);
}

// dw^T (C, OC) += inp^T (C, N) @ dout (N, OC; dout stored as column-major (OC, N)).
void CublasLtGemm::bf16_backward_weight(float* dw, const bf16* dout, const bf16* inp, int N,
                                        int C, int OC) {
  require_positive(N, C, OC, "bf16_backward_weight");
  Product p;
  p.transa = CUBLAS_OP_N;
  p.transb = CUBLAS_OP_T;
  p.m = C, p.n = OC, p.k = N;
  p.A = inp, p.a_type = CUDA_R_16BF, p.lda = C;
  p.B = dout, p.b_type = CUDA_R_16BF, p.ldb = OC;
  p.D = dw, p.d_type = CUDA_R_32F, p.ldd = C;
  p.beta = 1.0f;
  run(p);
}

// --- FP8 -------------------------------------------------------------------------------

void CublasLtGemm::fp8_gemm(void* d, Fp8Output d_type, const void* a, cudaDataType a_type,
                            const void* b, cudaDataType b_type, const bf16* bias, int M, int N,
                            int K, float beta, const Fp8Scales& scales) {
  if (!fp8_supported())
    throw std::runtime_error("CublasLtGemm: FP8 matmuls need compute capability 9.0 or newer "
                             "(Hopper); device " + std::to_string(device_index_) + " is " +
                             device_name_ + ": use bf16 here");
  if (!is_fp8(a_type) || !is_fp8(b_type))
    throw std::invalid_argument("CublasLtGemm::fp8_gemm: both operands must be E4M3 or E5M2");
  if (a_type == CUDA_R_8F_E5M2 && b_type == CUDA_R_8F_E5M2)
    throw std::invalid_argument("CublasLtGemm::fp8_gemm: cuBLASLt has no E5M2 x E5M2 product; "
                                "one operand must be E4M3");
  if (M <= 0 || N <= 0 || K <= 0 || M % 16 != 0 || N % 16 != 0 || K % 16 != 0)
    throw std::invalid_argument(
        "CublasLtGemm::fp8_gemm: M=" + std::to_string(M) + ", N=" + std::to_string(N) +
        ", K=" + std::to_string(K) + ": cuBLASLt's FP8 kernels need every dimension a "
        "positive multiple of 16 (16-byte aligned rows; pad the tensor, e.g. the vocabulary)");
  const cudaDataType out_type = fp8_output_type(d_type);
  if (is_fp8(out_type) && scales.d_scale == nullptr)
    throw std::invalid_argument("CublasLtGemm::fp8_gemm: an fp8 output needs scales.d_scale");
  if (!is_fp8(out_type) && (scales.d_scale != nullptr || scales.amax_d != nullptr))
    throw std::invalid_argument("CublasLtGemm::fp8_gemm: d_scale and amax_d apply to fp8 "
                                "outputs only (this output is fp32 or bf16)");
  if (is_fp8(out_type) && beta != 0.0f)
    throw std::invalid_argument("CublasLtGemm::fp8_gemm: an fp8 output cannot accumulate "
                                "(beta must be 0)");
  // d^T (N, M) = b (N, K; stored column-major (K, N), transposed) @ a^T (K, M): "TN".
  Product p;
  p.transa = CUBLAS_OP_T;
  p.transb = CUBLAS_OP_N;
  p.m = N, p.n = M, p.k = K;
  p.A = b, p.a_type = b_type, p.lda = K;
  p.B = a, p.b_type = a_type, p.ldb = K;
  p.D = d, p.d_type = out_type, p.ldd = N;
  p.beta = beta;
  p.bias = bias, p.bias_type = CUDA_R_16BF;  // FP8 kernels take a bf16 bias
  p.a_scale = scales.b_scale_inv;  // cuBLASLt's A is our b
  p.b_scale = scales.a_scale_inv;
  p.d_scale = scales.d_scale;
  p.amax_d = scales.amax_d;
  p.fast_accumulation = fp8_fast_accumulation_;
  run(p);
}

void CublasLtGemm::fp8_forward(void* out, Fp8Output out_type, const fp8_e4m3* inp,
                               const fp8_e4m3* w, const bf16* bias, int N, int C, int OC,
                               const Fp8Scales& scales) {
  fp8_gemm(out, out_type, inp, CUDA_R_8F_E4M3, w, CUDA_R_8F_E4M3, bias, N, OC, C, 0.0f, scales);
}

void CublasLtGemm::fp8_backward_input(void* dinp, Fp8Output out_type, const fp8_e5m2* dout,
                                      const fp8_e4m3* w_t, int N, int C, int OC,
                                      const Fp8Scales& scales) {
  fp8_gemm(dinp, out_type, dout, CUDA_R_8F_E5M2, w_t, CUDA_R_8F_E4M3, nullptr, N, C, OC, 0.0f,
           scales);
}

void CublasLtGemm::fp8_backward_weight(float* dw, const fp8_e5m2* dout_t, const fp8_e4m3* inp_t,
                                       int N, int C, int OC, const Fp8Scales& scales) {
  fp8_gemm(dw, Fp8Output::fp32, dout_t, CUDA_R_8F_E5M2, inp_t, CUDA_R_8F_E4M3, nullptr, OC, C, N,
           1.0f, scales);
}

}  // namespace dseek::gpu
