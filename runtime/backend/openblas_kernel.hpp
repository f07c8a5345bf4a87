// Which OpenBLAS kernels this process runs. OpenBLAS picks them when it is loaded, from
// the CPU's model; on a virtual CPU it does not know (a KVM guest's "Intel(R) Xeon(R)
// Processor") it falls back to Prescott, SSE3 kernels 4-5x slower than the AVX-512 ones
// the CPU runs. Its only switch is OPENBLAS_CORETYPE, read at load: so before main, a
// process that finds OpenBLAS on Prescott while the CPU has AVX2 or AVX-512, and the
// variable unset, sets it to the kernels the CPU's instructions allow (Cooperlake with
// AVX-512 BF16, SkylakeX with AVX-512, Haswell with AVX2 and FMA) and executes itself
// again: the same pid, arguments and environment but that one variable. A value the
// user set is kept (OPENBLAS_CORETYPE=Prescott keeps the fallback). Every program that
// links the CPU backend does it: dseek, dseek-node and the tests alike.
#pragma once

#include <string>

namespace dseek::backend {

// The kernels OpenBLAS runs ("SkylakeX", ...), and why when dseek chose them.
std::string openblas_kernels();

// What OPENBLAS_CORETYPE this CPU's instructions allow ("" when none beats Prescott).
const char* openblas_kernels_for_this_cpu();

}  // namespace dseek::backend
