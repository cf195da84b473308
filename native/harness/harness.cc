// adreno-harness: what an app does with an artifact, through TVM's C++ runtime API and nothing of Python.
//
//   adreno-harness ARTIFACT --input NAME=FILE.npy ... --output-dir DIR [--blob FILE] [--device N]
//                  [--repeat N] [--plugin PATH]
//
// 0. proves the artifact whole before anything of it is uploaded or launched: the manifest's run_sha256, the size and
//    SHA-256 of every file it reads, the plan's steps against their kernels' contracts (integrity.h,
//    kernel_contract.h), every field it reads bounded (artifact_spec.h);
// 1. loads TVM's OpenCL plugin (dlopen; an app links it instead) and the artifact's host library (lib.so);
// 2. with --blob, offers the program binaries of an earlier start when the file is for this device and these
//    kernels and its SHA-256 holds (blob_file.h); anything else is rejected and the programs are built from source;
// 3. loads the weights from params.npz once, each in its plan scope (an image for a texture scope), and
//    runs the Relax VM's `main` (inputs, then the weights in manifest.json's host_params order) on the inputs (ONNX names, as in manifest.json; order from plan.json) and writes
//    each output to DIR/<output name>.npy;
// 4. after a start that built anything from source, writes the binaries to --blob for the next start (atomically;
//    a start that cannot write them runs without: the blob is a cache);
// 5. prints one JSON line: the start's stages in milliseconds, where the programs came from, and the outputs.
// Exit status: 0 on success, 2 with a one-line error on bad input (an index out of range included:
// index_checks.h) or a failing device.
#include <dlfcn.h>
#include <unistd.h>
#include <tvm/ffi/extra/json.h>
#include <tvm/ffi/extra/module.h>
#include <tvm/ffi/function.h>
#include <tvm/runtime/tensor.h>

#include <algorithm>
#include <cctype>
#include <cstring>
#include <optional>
#include <chrono>
#include <cstdio>
#include <map>
#include <stdexcept>
#include <string>
#include <vector>

#include "artifact_spec.h"
#include "atomic_file.h"
#include "blob_file.h"
#include "elf_file.h"
#include "half.h"
#include "index_checks.h"
#include "integrity.h"
#include "kernel_contract.h"
#include "npy.h"
#include "sha256.h"
#include "weight_forms.h"
#include "weights.h"

namespace ffi = tvm::ffi;
using adreno_harness::NpyArray;
using adreno_harness::Port;

namespace {

struct Options {
  std::string artifact, output_dir, blob, plugin;
  std::map<std::string, std::string> inputs;  // model input name -> .npy file
  int device = 0, repeat = 0;
};

class UsageError : public std::runtime_error {
  using std::runtime_error::runtime_error;
};

const char kUsage[] =
    "usage: adreno-harness ARTIFACT --input NAME=FILE.npy ... --output-dir DIR [--blob FILE] [--device N] "
    "[--repeat N] [--plugin PATH]";

Options ParseArgs(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    auto value = [&]() -> std::string {
      if (i + 1 >= argc) throw UsageError(arg + " needs a value");
      return argv[++i];
    };
    if (arg == "--input") {
      std::string pair = value();
      size_t eq = pair.find('=');
      if (eq == std::string::npos || eq == 0) throw UsageError("--input takes NAME=FILE.npy, not " + pair);
      o.inputs[pair.substr(0, eq)] = pair.substr(eq + 1);
    } else if (arg == "--output-dir") {
      o.output_dir = value();
    } else if (arg == "--blob") {
      o.blob = value();
    } else if (arg == "--plugin") {
      o.plugin = value();
    } else if (arg == "--device" || arg == "--repeat") {
      std::string text = value();
      if (text.empty() || text.find_first_not_of("0123456789") != std::string::npos) {
        throw UsageError(arg + " takes a non-negative integer, not " + text);
      }
      (arg == "--device" ? o.device : o.repeat) = std::stoi(text);
    } else if (arg == "-h" || arg == "--help") {
      std::puts(kUsage);
      std::exit(0);
    } else if (!arg.empty() && arg[0] == '-') {
      throw UsageError("unknown option " + arg);
    } else if (o.artifact.empty()) {
      o.artifact = arg;
    } else {
      throw UsageError("one artifact only, got " + o.artifact + " and " + arg);
    }
  }
  if (o.artifact.empty() || o.output_dir.empty()) throw UsageError(kUsage);
  return o;
}

double Ms(std::chrono::steady_clock::time_point since) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - since).count();
}

std::string JsonString(const std::string& text) {
  std::string out = "\"";
  for (char c : text) {
    if (c == '"' || c == '\\') out += '\\';
    if (static_cast<unsigned char>(c) < 0x20) {
      char esc[8];
      std::snprintf(esc, sizeof(esc), "\\u%04x", c);
      out += esc;
      continue;
    }
    out += c;
  }
  return out + "\"";
}

// Calls `verify` and adds its milliseconds to *total: the start's price of proving the artifact whole.
template <typename Verify>
void Timed(double* total, const Verify& verify) {
  auto since = std::chrono::steady_clock::now();
  verify();
  *total += Ms(since);
}

// The artifact's JSON file `name`, whole (plan.json: of the size and SHA-256 the manifest lists).
ffi::json::Object ReadArtifactJson(const std::string& artifact, const std::string& name,
                                   const ffi::json::Object* manifest, double* verify_ms) {
  const std::string text = adreno_harness::ReadFile(artifact + "/" + name);
  if (manifest != nullptr) {
    Timed(verify_ms, [&] { adreno_harness::VerifyListedFile(*manifest, name, text.data(), text.size()); });
  }
  return adreno_harness::ParseJsonObject(text, artifact + "/" + name);
}

DLDataType DataType(const std::string& dtype) {
  static const std::map<std::string, DLDataType> table = {
      {"float32", {kDLFloat, 32, 1}}, {"float16", {kDLFloat, 16, 1}}, {"int64", {kDLInt, 64, 1}},
      {"int32", {kDLInt, 32, 1}},     {"int8", {kDLInt, 8, 1}},       {"uint8", {kDLUInt, 8, 1}},
      {"bool", {kDLBool, 8, 1}}};
  auto found = table.find(dtype);
  if (found == table.end()) throw std::runtime_error("dtype " + dtype + " is not one the harness moves");
  return found->second;
}

// The module of `kind` in the import tree under `root` (the host library's OpenCL kernels), if any.
std::optional<ffi::Module> FindModule(const ffi::Module& root, const std::string& kind) {
  if (root->kind() == kind) return root;
  for (const ffi::Any& child : root->imports()) {
    if (auto found = FindModule(child.cast<ffi::Module>(), kind)) return found;
  }
  return std::nullopt;
}

int64_t Elements(const std::vector<int64_t>& shape) {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

std::string Names(const std::vector<Port>& ports) {
  std::string out;
  for (const Port& p : ports) out += (out.empty() ? "" : ", ") + p.name;
  return out;
}

std::string SafeFileName(const std::string& name) {
  std::string out = name;
  for (char& c : out) {
    if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '-' || c == '.')) c = '_';
  }
  return out.empty() || out[0] == '.' ? "_" + out : out;
}

std::string PluginBesideHarness() {
  char self[4096];
  ssize_t n = readlink("/proc/self/exe", self, sizeof(self) - 1);
  if (n <= 0) return "libtvm_runtime_opencl.so";
  std::string path(self, n);
  return path.substr(0, path.rfind('/') + 1) + "libtvm_runtime_opencl.so";
}

int Run(const Options& o) {
  auto start = std::chrono::steady_clock::now();
  std::string plugin = o.plugin.empty() ? PluginBesideHarness() : o.plugin;
  if (dlopen(plugin.c_str(), RTLD_NOW | RTLD_GLOBAL) == nullptr) {
    throw std::runtime_error("cannot load TVM's OpenCL plugin " + plugin + " (" + dlerror() + "); build it with "
                             "`make install` or give --plugin");
  }
  double verify_ms = 0;
  ffi::json::Object manifest = ReadArtifactJson(o.artifact, "manifest.json", nullptr, &verify_ms);
  if (manifest.find(ffi::String("shape_sets")) != manifest.end()) {
    throw std::runtime_error(o.artifact + " holds several shape sets; the harness runs an artifact of one: run it "
                             "with `adreno run` or the Python API, or compile one shape per artifact (docs/shapes.md)");
  }
  Timed(&verify_ms, [&] { adreno_harness::VerifyRunDigest(manifest); });
  ffi::json::Object plan = ReadArtifactJson(o.artifact, "plan.json", &manifest, &verify_ms);
  const adreno_harness::ArtifactSpec spec = adreno_harness::ReadArtifactSpec(plan, manifest);
  Timed(&verify_ms, [&] { adreno_harness::CheckKernelContracts(o.artifact, plan, manifest); });
  auto library = manifest.find(ffi::String("host_library"));
  std::string library_name = library != manifest.end() && (*library).second.try_cast<ffi::String>()
                                 ? std::string((*library).second.cast<ffi::String>()) : "";
  if (library_name != "lib.so") {
    throw std::runtime_error(o.artifact + " has no loadable host library (manifest host_library: " +
                             (library_name.empty() ? "none" : library_name) + "); compile with --host native");
  }
  auto devices = ffi::Function::GetGlobal("adreno.opencl.device_names");
  if (!devices) throw std::runtime_error(plugin + " is not adreno's OpenCL plugin (no adreno.opencl.device_names)");
  auto names = (*devices)().cast<ffi::Array<ffi::String>>();
  if (names.empty()) throw std::runtime_error("no OpenCL device: install an OpenCL driver (PoCL on a CPU)");
  if (o.device >= static_cast<int>(names.size())) {
    throw std::runtime_error("no OpenCL device " + std::to_string(o.device) + " (" + std::to_string(names.size()) +
                             " found)");
  }
  std::string identity = names[o.device];
  double plugin_ms = Ms(start);

  auto stage = std::chrono::steady_clock::now();
  const std::string library_bytes = adreno_harness::ReadFile(o.artifact + "/lib.so");
  Timed(&verify_ms, [&] {
    adreno_harness::VerifyListedFile(manifest, "lib.so", library_bytes.data(), library_bytes.size());
  });
  std::string elf_problem = adreno_harness::ElfProblem(o.artifact + "/lib.so");
  if (!elf_problem.empty()) {
    throw std::runtime_error(o.artifact + "/lib.so " + elf_problem + ": compile the artifact again");
  }
  ffi::Module executable = ffi::Module::LoadFromFile(o.artifact + "/lib.so");
  if (executable->kind() != std::string("relax.VMExecutable")) {
    throw std::runtime_error(o.artifact + "/lib.so is a " + std::string(executable->kind()) + " module, not a Relax VM "
                             "executable");
  }
  ffi::Module vm = executable->GetFunction("vm_load_executable").value()().cast<ffi::Module>();
  constexpr int kPooled = 2;
  vm->GetFunction("vm_initialization").value()(static_cast<int>(kDLOpenCL), o.device, kPooled,
                                                 static_cast<int>(kDLCPU), 0, kPooled);
  double load_ms = Ms(stage);

  std::optional<ffi::Module> kernels = FindModule(executable, "opencl");
  std::string blob_state = "not used", key;
  stage = std::chrono::steady_clock::now();
  if (kernels && !o.blob.empty()) {
    ffi::Bytes module_bytes = (*kernels)->SaveToBytes();
    key = identity + "\n" + adreno_harness::Sha256Hex(module_bytes.data(), module_bytes.size());
    std::string why;
    if (auto payload = adreno_harness::LoadBlobFile(o.blob, key, &why)) {
      int64_t taken = (*kernels)->GetFunction("opencl.SetPreCompiledPrograms").value()(ffi::Bytes(*payload))
                          .cast<int64_t>();
      blob_state = taken > 0 ? "loaded" : "rejected by the driver";
    } else {
      blob_state = why == "absent" ? "absent" : "rejected: " + why;
    }
  }
  double blob_ms = Ms(stage);

  const std::vector<Port>& inputs = spec.inputs;
  const std::vector<Port>& outputs = spec.outputs;
  tvm::Device device{kDLOpenCL, o.device};
  std::vector<ffi::Any> args;
  for (const Port& port : inputs) {
    auto file = o.inputs.find(port.name);
    if (file == o.inputs.end()) file = o.inputs.find(port.tensor);
    if (file == o.inputs.end()) {
      throw UsageError("no --input " + port.name + "=FILE.npy (the model's inputs: " + Names(inputs) + ")");
    }
    NpyArray array = adreno_harness::ReadNpy(file->second);
    if (array.dtype != port.dtype || array.shape != port.shape) {
      std::string want;
      for (int64_t d : port.shape) want += (want.empty() ? "" : "x") + std::to_string(d);
      throw UsageError(file->second + ": input " + port.name + " must be " + port.dtype + " " + want);
    }
    tvm::runtime::Tensor tensor = tvm::runtime::Tensor::Empty(ffi::Shape(port.shape), DataType(port.dtype), device);
    tensor.CopyFromBytes(array.data.data(), array.data.size());
    args.push_back(tensor);
  }
  for (const auto& given : o.inputs) {
    bool known = std::any_of(inputs.begin(), inputs.end(),
                             [&](const Port& p) { return p.name == given.first || p.tensor == given.first; });
    if (!known) throw UsageError("--input " + given.first + ": the model has no input of that name");
  }
  stage = std::chrono::steady_clock::now();
  std::optional<adreno_harness::WeightFile> weight_file(
      std::in_place, o.artifact + "/params.npz", [&](const void* data, size_t size) {
        Timed(&verify_ms, [&] { adreno_harness::VerifyListedFile(manifest, "params.npz", data, size); });
      });
  const std::map<std::string, adreno_harness::NpyView>& weights = weight_file->arrays();
  ffi::Function empty_image = ffi::Function::GetGlobal("adreno.opencl.empty_image").value();
  ffi::Function write_pixels = ffi::Function::GetGlobal("adreno.opencl.write_pixels").value();
  for (const adreno_harness::ParamSpec& param : spec.params) {
    const std::string& name = param.name;
    const std::string& scope = param.scope;
    const std::string& dtype = param.dtype;
    const std::vector<int64_t>& shape = param.shape;
    auto weight = weights.find(name);
    if (weight == weights.end()) throw std::runtime_error(o.artifact + "/params.npz has no " + name);
    const bool half_pixels = param.half_pixels;
    // the member is the param when it has no stored form and no half pixels: copied from the mapped file as it is
    const bool rebuilt = param.stored || half_pixels;
    adreno_harness::Floats values;
    if (rebuilt) {
      values = adreno_harness::ParamValues(name, weight->second, param.form, shape);
    } else if (dtype != weight->second.dtype || shape != weight->second.shape) {
      throw std::runtime_error(name + " in params.npz is " + weight->second.dtype + ", the plan says otherwise");
    }
    if (half_pixels) {
      // an fp16 artifact: a float32 tensor in a half-float image, uploaded as half pixels (host_library.py)
      std::string pixels(values.size() * 2, '\0');
      for (size_t i = 0; i < values.size(); ++i) {
        uint16_t half = adreno_harness::FloatToHalf(values[i]);
        std::memcpy(pixels.data() + 2 * i, &half, 2);
      }
      ffi::Tensor tensor = empty_image(ffi::Shape(shape), DataType("float32"), o.device, ffi::String(scope), 16)
                               .cast<ffi::Tensor>();
      write_pixels(tensor, ffi::Bytes(pixels));
      args.push_back(tensor);
      continue;
    }
    ffi::Optional<ffi::String> mem_scope = std::nullopt;
    if (scope != "global") mem_scope = ffi::String(scope);
    tvm::runtime::Tensor tensor = tvm::runtime::Tensor::Empty(ffi::Shape(shape), DataType(dtype), device, mem_scope);
    if (rebuilt) {
      tensor.CopyFromBytes(values.data(), values.size() * sizeof(float));
    } else {
      tensor.CopyFromBytes(weight->second.data, weight->second.size);
    }
    args.push_back(tensor);
  }
  weight_file.reset();  // every weight is on the device now
  double weights_ms = Ms(stage);
  ffi::Function main = vm->GetFunction("main").value();
  std::vector<ffi::AnyView> views(args.begin(), args.end());
  auto call = [&]() {
    ffi::Any result;
    main.CallPacked(views.data(), static_cast<int32_t>(views.size()), &result);
    return result;
  };
  stage = std::chrono::steady_clock::now();
  ffi::Any result = call();
  std::vector<tvm::runtime::Tensor> results;
  if (auto one = result.try_cast<tvm::runtime::Tensor>()) {
    results.push_back(*one);
  } else {
    for (const ffi::Any& item : result.cast<ffi::Array<ffi::Any>>()) results.push_back(item.cast<tvm::runtime::Tensor>());
  }
  if (results.size() != outputs.size()) {
    throw std::runtime_error("the host library returned " + std::to_string(results.size()) + " outputs, the plan has " +
                             std::to_string(outputs.size()));
  }
  std::vector<NpyArray> host(results.size());
  for (size_t i = 0; i < results.size(); ++i) {
    const std::vector<int64_t> got(results[i].Shape().begin(), results[i].Shape().end());
    const DLDataType have = results[i]->dtype, want = DataType(outputs[i].dtype);
    if (got != outputs[i].shape || have.code != want.code || have.bits != want.bits || have.lanes != want.lanes) {
      throw std::runtime_error("the host library's output " + std::to_string(i) + " is not the plan's " +
                               outputs[i].name + " (" + outputs[i].dtype + "): lib.so and plan.json disagree");
    }
    host[i].dtype = outputs[i].dtype;
    host[i].shape = outputs[i].shape;
    host[i].data.resize(adreno_harness::DtypeBytes(host[i].dtype) * Elements(host[i].shape));
    results[i].CopyToBytes(host[i].data.data(), host[i].data.size());  // waits for the run
  }
  adreno_harness::CheckIndexFlags(manifest, outputs.back().tensor, host.back());  // an index out of range: exit 2
  double first_run_ms = Ms(stage);

  std::string stats = "";
  if (kernels) {
    stats = (*kernels)->GetFunction("adreno.opencl.program_stats").value()().cast<ffi::String>();
    bool built_from_source = stats.find("from_source=0") == std::string::npos;
    if (!o.blob.empty() && built_from_source) {
      ffi::Bytes blob = (*kernels)->GetFunction("opencl.GetPreCompiledPrograms").value()().cast<ffi::Bytes>();
      try {  // the blob is a cache: a start that cannot write it (a full disk) runs without it
        adreno_harness::SaveBlobFile(o.blob, key, std::string(blob.data(), blob.size()));
        blob_state += blob_state == "loaded" ? "; updated" : "; written";
      } catch (const std::runtime_error& err) {
        blob_state += std::string("; not written: ") + err.what();
      }
    }
  }
  std::vector<double> runs;
  for (int r = 0; r < o.repeat; ++r) {
    auto t = std::chrono::steady_clock::now();
    ffi::Any again = call();
    results[0].CopyToBytes(host[0].data.data(), host[0].data.size());
    runs.push_back(Ms(t));
  }
  std::string written;
  for (size_t i = 0; i < results.size(); ++i) {
    if (adreno_harness::IsIndexFlags(manifest, outputs[i].tensor)) continue;  // checked above, not the model's
    std::string path = o.output_dir + "/" + SafeFileName(outputs[i].name) + ".npy";
    adreno_harness::WriteNpy(path, host[i]);
    written += (i ? ", " : "") + JsonString(outputs[i].name) + ": " + JsonString(path);
  }
  std::sort(runs.begin(), runs.end());
  std::printf("{\"device\": %s, \"plugin_ms\": %.3f, \"load_ms\": %.3f, \"blob_ms\": %.3f, \"weights_ms\": %.3f, "
              "\"first_run_ms\": %.3f, \"start_ms\": %.3f, \"verify_ms\": %.3f, \"median_ms\": %s, \"blob\": %s, "
              "\"programs\": %s, \"outputs\": {%s}}\n",
              JsonString(identity).c_str(), plugin_ms, load_ms, blob_ms, weights_ms, first_run_ms,
              plugin_ms + load_ms + blob_ms + weights_ms + first_run_ms, verify_ms,
              runs.empty() ? "null" : std::to_string(runs[runs.size() / 2]).c_str(), JsonString(blob_state).c_str(),
              JsonString(stats).c_str(), written.c_str());
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    return Run(ParseArgs(argc, argv));
  } catch (const std::bad_alloc&) {  // the readers bound every size by the file's bytes; this is the device's memory
    std::fprintf(stderr, "error: out of memory while starting the model\n");
    return 2;
  } catch (const std::exception& err) {
    std::string message = err.what();
    // TVM's errors carry a traceback after the first line; the user gets the line that says what went wrong.
    size_t newline = message.find('\n');
    std::fprintf(stderr, "error: %s\n", message.substr(0, newline).c_str());
    return 2;
  }
}
