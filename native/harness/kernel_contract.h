// The plan's steps against what their kernels were lowered for, as adreno.artifact.kernel_contract checks them in
// Python: each program's source (kernels/*.cl.gz, of the SHA-256 the manifest lists) starts with a contract line giving
// every argument's shape, dtype and memory scope; a step whose tensor differs (a weight's texture scope switched to
// global in plan.json: a buffer handed to an image argument, SIGSEGV in the driver at launch, issue 46) is refused
// before any launch, in one line naming the step, the argument and both sides.
#ifndef ADRENO_HARNESS_KERNEL_CONTRACT_H_
#define ADRENO_HARNESS_KERNEL_CONTRACT_H_

#include <string>

#include "json_fields.h"

namespace adreno_harness {

// Throws std::runtime_error naming plan.json's step or the kernel file.
void CheckKernelContracts(const std::string& artifact, const json::Object& plan, const json::Object& manifest);

// The first line of a gzip stream (at most 1 MiB of it): a kernel source's contract line. Throws
// std::runtime_error naming `where` when the bytes are not gzip.
std::string FirstGzipLine(const std::string& bytes, const std::string& where);

}  // namespace adreno_harness

#endif  // ADRENO_HARNESS_KERNEL_CONTRACT_H_
