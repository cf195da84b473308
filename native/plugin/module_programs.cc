#include "module_programs.h"

#include <set>
#include <sstream>

namespace adreno_native {

namespace {

std::string BuildLog(cl_program program, cl_device_id device) {
  size_t size = 0;
  if (clGetProgramBuildInfo(program, device, CL_PROGRAM_BUILD_LOG, 0, nullptr, &size) != CL_SUCCESS) return "";
  std::string log(size, '\0');
  if (clGetProgramBuildInfo(program, device, CL_PROGRAM_BUILD_LOG, size, log.data(), nullptr) != CL_SUCCESS) return "";
  while (!log.empty() && (log.back() == '\0' || log.back() == '\n')) log.pop_back();
  constexpr size_t kMaxLog = 4000;
  return log.size() > kMaxLog ? log.substr(0, kMaxLog) + "\n[... build log cut]" : log;
}

std::vector<std::string> KernelNames(cl_program program) {
  size_t size = 0;
  CL_CALL(clGetProgramInfo, program, CL_PROGRAM_KERNEL_NAMES, 0, nullptr, &size);
  std::string names(size, '\0');
  CL_CALL(clGetProgramInfo, program, CL_PROGRAM_KERNEL_NAMES, size, names.data(), nullptr);
  std::vector<std::string> out;
  std::stringstream stream(names.c_str());
  for (std::string name; std::getline(stream, name, ';');) {
    if (!name.empty()) out.push_back(name);
  }
  return out;
}

std::string ProgramBinary(cl_program program) {
  size_t size = 0;
  CL_CALL(clGetProgramInfo, program, CL_PROGRAM_BINARY_SIZES, sizeof(size), &size, nullptr);
  std::string binary(size, '\0');
  unsigned char* data = reinterpret_cast<unsigned char*>(binary.data());
  CL_CALL(clGetProgramInfo, program, CL_PROGRAM_BINARIES, sizeof(data), &data, nullptr);
  return binary;
}

cl_uint KernelArgCount(cl_kernel kernel) {
  cl_uint count = 0;
  CL_CALL(clGetKernelInfo, kernel, CL_KERNEL_NUM_ARGS, sizeof(count), &count, nullptr);
  return count;
}

}  // namespace

std::shared_ptr<ModulePrograms::Program> ModulePrograms::BuildFromSource() {
  if (module_.format != "cl") {
    throw std::runtime_error("the module holds '" + module_.format + "', not OpenCL C source ('cl')");
  }
  const char* source = module_.data.c_str();
  size_t length = module_.data.size();
  cl_int status = CL_SUCCESS;
  ClProgram program(clCreateProgramWithSource(device_.context.get(), 1, &source, &length, &status));
  CheckCl(status, "clCreateProgramWithSource", device_.name);
  cl_device_id id = device_.id;
  status = clBuildProgram(program.get(), 1, &id, "", nullptr, nullptr);
  if (status != CL_SUCCESS) throw ClError("clBuildProgram", status, device_.name + ":\n" + BuildLog(program.get(), id));
  auto built = std::make_shared<Program>();
  built->program = std::move(program);
  for (const auto& entry : module_.kernels) {
    if (!by_kernel_.count(entry.first)) {
      built->kernels.push_back(entry.first);
      by_kernel_[entry.first] = built;
    }
  }
  programs_.push_back(built);
  ++stats_.from_source;
  return built;
}

cl_kernel ModulePrograms::Kernel(const std::string& name) {
  auto made = kernels_.find(name);
  if (made != kernels_.end()) return made->second.get();
  const KernelInfo* info = module_.Find(name);
  if (info == nullptr) throw std::invalid_argument("the module has no kernel " + name);
  auto program = by_kernel_.find(name);
  std::shared_ptr<Program> built = program != by_kernel_.end() ? program->second : BuildFromSource();
  cl_int status = CL_SUCCESS;
  ClKernel kernel(clCreateKernel(built->program.get(), name.c_str(), &status));
  CheckCl(status, "clCreateKernel", name);
  if (KernelArgCount(kernel.get()) != info->arg_types.size()) {
    throw std::runtime_error("kernel " + name + " takes " + std::to_string(KernelArgCount(kernel.get())) +
                             " arguments, the module says " + std::to_string(info->arg_types.size()));
  }
  return kernels_.emplace(name, std::move(kernel)).first->second.get();
}

void ModulePrograms::Reject(const std::string& reason) {
  ++stats_.rejected;
  stats_.last_rejection = reason;
}

std::string ModulePrograms::ValidateBinary(const std::string& name, const std::string& binary,
                                           std::shared_ptr<Program>* out) {
  const unsigned char* data = reinterpret_cast<const unsigned char*>(binary.data());
  size_t length = binary.size();
  cl_int binary_status = CL_SUCCESS, status = CL_SUCCESS;
  cl_device_id id = device_.id;
  ClProgram program(clCreateProgramWithBinary(device_.context.get(), 1, &id, &length, &data, &binary_status, &status));
  if (status != CL_SUCCESS || binary_status != CL_SUCCESS) {
    return "binary of " + name + " is not for this device (" + ClErrorName(status != CL_SUCCESS ? status : binary_status) + ")";
  }
  status = clBuildProgram(program.get(), 1, &id, "", nullptr, nullptr);
  if (status != CL_SUCCESS) return "binary of " + name + " does not build (" + ClErrorName(status) + ")";
  auto built = std::make_shared<Program>();
  std::vector<std::string> contained = KernelNames(program.get());
  std::set<std::string> names(contained.begin(), contained.end());
  if (!names.count(name)) return "binary named " + name + " does not contain that kernel";
  for (const auto& entry : module_.kernels) {
    if (!names.count(entry.first) || by_kernel_.count(entry.first)) continue;
    ClKernel kernel(clCreateKernel(program.get(), entry.first.c_str(), &status));
    if (status != CL_SUCCESS || KernelArgCount(kernel.get()) != entry.second.arg_types.size()) {
      return "binary of " + name + ": kernel " + entry.first + " is not the module's";
    }
    built->kernels.push_back(entry.first);
  }
  built->program = std::move(program);
  *out = std::move(built);
  return "";
}

int ModulePrograms::LoadBlob(const std::string& bytes) {
  std::lock_guard<std::mutex> guard(mutex_);
  ProgramBlob blob;
  try {
    blob = ParseProgramBlob(bytes);
  } catch (const std::invalid_argument& err) {
    Reject(err.what());
    return 0;
  }
  int taken = 0;
  for (const auto& [name, binary] : blob) {
    if (module_.Find(name) == nullptr) {
      Reject("blob entry " + name + " is not a kernel of this module");
      continue;
    }
    if (by_kernel_.count(name)) continue;  // already served (an earlier entry's program contains it)
    std::shared_ptr<Program> built;
    std::string problem = ValidateBinary(name, binary, &built);
    if (!problem.empty()) {
      Reject(problem);
      continue;
    }
    for (const std::string& kernel : built->kernels) by_kernel_[kernel] = built;
    programs_.push_back(built);
    ++stats_.from_binary;
    ++taken;
  }
  return taken;
}

std::string ModulePrograms::SaveBlob() {
  std::lock_guard<std::mutex> guard(mutex_);
  bool missing = false;
  for (const auto& entry : module_.kernels) missing = missing || !by_kernel_.count(entry.first);
  if (missing) BuildFromSource();
  ProgramBlob blob;
  for (const auto& program : programs_) {
    if (!program->kernels.empty()) blob.emplace_back(program->kernels.front(), ProgramBinary(program->program.get()));
  }
  return WriteProgramBlob(blob);
}

ProgramStats ModulePrograms::stats() {
  std::lock_guard<std::mutex> guard(mutex_);
  return stats_;
}

}  // namespace adreno_native
