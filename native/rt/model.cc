#include "model.h"

#include <tvm/ffi/container/array.h>
#include <tvm/runtime/tensor.h>

#include <chrono>

#include "../harness/index_checks.h"
#include "../harness/integrity.h"
#include "../harness/npy.h"
#include "device_weights.h"
#include "opencl_runtime.h"
#include "rt_error.h"

namespace ffi = tvm::ffi;

namespace adreno_rt {

namespace {

using adreno_harness::DimsText;

using Clock = std::chrono::steady_clock;

double MsSince(Clock::time_point since) {
  return std::chrono::duration<double, std::milli>(Clock::now() - since).count();
}

// How the caller's memory for one side of a run is named in its errors.
struct Side {
  const char* port;     // "input"
  const char* verb;     // the model "takes" them
  const char* lacking;  // what a NULL data pointer lacks
};

// `memory` (an adreno_rt_view or adreno_rt_buffer array of `count`) gives one entry of each port's exact size, data
// not NULL; otherwise an INVALID_ARGUMENT error in `side`'s words.
template <typename Memory>
void CheckMemory(const std::vector<Port>& ports, const Memory* memory, size_t count, const Side& side) {
  const std::string port_kind = side.port;
  if (count != ports.size()) {
    throw RtError(ADRENO_RT_INVALID_ARGUMENT, "the model " + std::string(side.verb) + " " +
                                                  std::to_string(ports.size()) + " " + port_kind + "s, not " +
                                                  std::to_string(count));
  }
  if (count > 0 && memory == nullptr) throw RtError(ADRENO_RT_INVALID_ARGUMENT, port_kind + "s is NULL");
  for (size_t i = 0; i < count; ++i) {
    const Port& port = ports[i];
    if (memory[i].bytes != port.bytes) {
      throw RtError(ADRENO_RT_INVALID_ARGUMENT, port_kind + " " + port.name + " is " + port.dtype.name + " " +
                                                    DimsText(port.shape) + ", " + std::to_string(port.bytes) +
                                                    " bytes, not " + std::to_string(memory[i].bytes));
    }
    if (memory[i].data == nullptr && port.bytes > 0) {
      throw RtError(ADRENO_RT_INVALID_ARGUMENT, port_kind + " " + port.name + " has " + side.lacking + " (NULL)");
    }
  }
}

}  // namespace

Model::Model(const std::string& dir, const OpenOptions& options) : dir_(dir) {
  auto start = Clock::now();
  RequirePlugin(options.plugin_path.empty() ? PluginBesideLibrary() : options.plugin_path);
  files_ = ReadArtifactFiles(dir, &times_.verify_ms);
  const bool one_set = files_.sets.size() == 1;
  if (one_set) VerifySetCode(dir, files_, 0, &times_.verify_ms);  // proved before anything is loaded
  device_id_ = SelectDevice(options.device_index, options.device_name, &identity_);
  times_.plugin_ms = MsSince(start);

  auto stage = Clock::now();
  programs_ = std::make_unique<ProgramCache>(identity_, KernelsKey(files_), options.blob_path, options.write_blob);
  times_.blob_ms = MsSince(stage);

  stage = Clock::now();
  // a weight that several sets take in the same form is one device tensor
  std::vector<adreno_harness::ParamSpec> distinct;
  for (const ShapeSetFiles& set : files_.sets) {
    weight_of_.emplace_back();
    for (const adreno_harness::ParamSpec& spec : set.params) {
      size_t at = 0;
      while (at < distinct.size() && !SameUpload(distinct[at], spec)) ++at;
      if (at == distinct.size()) distinct.push_back(spec);
      weight_of_.back().push_back(at);
    }
  }
  auto verify = [&](const void* data, size_t size) {
    auto since = Clock::now();
    adreno_harness::VerifyListedFile(files_.manifest, "params.npz", data, size);
    times_.verify_ms += MsSince(since);
  };
  weights_ = UploadWeights(dir + "/params.npz", distinct, device_id_, options.weight_threads, verify);
  times_.weights_ms = MsSince(stage);

  loaded_.resize(files_.sets.size());
  // an artifact of one set is loaded now; of several, a set is loaded when it is selected or first runs (set 0,
  // selected at open, included): an app whose requests take another shape never loads set 0's library
  if (one_set) Load(0);
}

Model::LoadedSet& Model::Load(size_t index) {
  if (loaded_[index]) return *loaded_[index];
  const ShapeSetFiles& files = files_.sets[index];
  const std::string library = dir_ + "/" + files.library;
  if (files_.sets.size() > 1) VerifySetCode(dir_, files_, index, &times_.verify_ms);  // one set's: at open
  auto stage = Clock::now();
  auto set = std::make_unique<LoadedSet>();
  ffi::Module executable = Stage(ADRENO_RT_BAD_ARTIFACT, library, [&] { return ffi::Module::LoadFromFile(library); });
  if (executable->kind() != std::string("relax.VMExecutable")) {
    throw RtError(ADRENO_RT_BAD_ARTIFACT, library + " is a " + std::string(executable->kind()) +
                                              " module, not a Relax VM executable");
  }
  Stage(ADRENO_RT_DEVICE, "starting the Relax VM", [&] {
    set->vm = executable->GetFunction("vm_load_executable").value()().cast<ffi::Module>();
    constexpr int kPooled = 2;
    (*set->vm)->GetFunction("vm_initialization").value()(static_cast<int>(kDLOpenCL), device_id_, kPooled,
                                                        static_cast<int>(kDLCPU), 0, kPooled);
    set->main = (*set->vm)->GetFunction("main").value();
  });
  times_.load_ms += MsSince(stage);

  stage = Clock::now();
  programs_->Attach(index, executable);
  times_.blob_ms += MsSince(stage);

  Stage(ADRENO_RT_DEVICE, "allocating the inputs", [&] {
    for (const Port& port : files.inputs) {
      set->args.push_back(tvm::runtime::Tensor::Empty(ffi::Shape(port.shape), port.dtype.tvm,
                                                      tvm::Device{kDLOpenCL, device_id_}));
    }
  });
  for (size_t weight : weight_of_[index]) set->args.push_back(weights_[weight]);
  loaded_[index] = std::move(set);
  return *loaded_[index];
}

void Model::SelectShapes(const std::vector<std::vector<int64_t>>& shapes) {
  if (shapes.size() != inputs().size()) {
    throw RtError(ADRENO_RT_INVALID_ARGUMENT, "the model takes " + std::to_string(inputs().size()) +
                                                  " inputs, not " + std::to_string(shapes.size()) + " shapes");
  }
  std::vector<Port> given = inputs();
  std::string compiled;
  for (size_t index = 0; index < files_.sets.size(); ++index) {
    const std::vector<Port>& ports = files_.sets[index].inputs;
    bool same = true;
    for (size_t k = 0; k < ports.size(); ++k) same = same && ports[k].shape == shapes[k];
    if (same) {
      Load(index);
      selected_ = index;
      return;
    }
    compiled += (compiled.empty() ? "" : "; ") + ShapesLabel(ports);
  }
  for (size_t k = 0; k < given.size(); ++k) given[k].shape = shapes[k];
  // adreno.artifact.shape_sets.matching's words
  throw RtError(ADRENO_RT_INVALID_ARGUMENT, "no shape set of this artifact takes " + ShapesLabel(given) +
                                                "; it was compiled for " + compiled +
                                                " (pad the input to one of them, or compile its shape with another "
                                                "--input-shape)");
}

void Model::CheckInputs(const adreno_rt_view* inputs, size_t count) const {
  CheckMemory(this->inputs(), inputs, count, {"input", "takes", "no data"});
}

std::vector<tvm::runtime::Tensor> Model::Call(const adreno_rt_view* inputs) {
  LoadedSet& set = Load(selected_);
  const ShapeSetFiles& files = files_.sets[selected_];
  std::vector<tvm::runtime::Tensor> results;
  Stage(ADRENO_RT_RUN_FAILED, "running the model", [&] {
    for (size_t i = 0; i < files.inputs.size(); ++i) {
      if (inputs[i].bytes > 0) set.args[i].cast<tvm::runtime::Tensor>().CopyFromBytes(inputs[i].data, inputs[i].bytes);
    }
    std::vector<ffi::AnyView> views(set.args.begin(), set.args.end());
    ffi::Any result;
    set.main.CallPacked(views.data(), static_cast<int32_t>(views.size()), &result);
    if (auto one = result.try_cast<tvm::runtime::Tensor>()) {
      results.push_back(*one);
    } else {
      for (const ffi::Any& item : result.cast<ffi::Array<ffi::Any>>()) {
        results.push_back(item.cast<tvm::runtime::Tensor>());
      }
    }
  });
  std::vector<Port> ports = files.outputs;
  if (files.index_flags) ports.push_back(*files.index_flags);
  if (results.size() != ports.size()) {
    throw RtError(ADRENO_RT_BAD_ARTIFACT, "the host library returned " + std::to_string(results.size()) +
                                              " outputs, the plan has " + std::to_string(ports.size()));
  }
  for (size_t i = 0; i < results.size(); ++i) {
    const Port& port = ports[i];
    std::vector<int64_t> shape(results[i].shape().begin(), results[i].shape().end());
    if (shape != port.shape || results[i].dtype() != port.dtype.tvm) {
      throw RtError(ADRENO_RT_BAD_ARTIFACT, "output " + port.name + " came back " + DimsText(shape) +
                                                ", the plan says " + port.dtype.name + " " + DimsText(port.shape));
    }
  }
  if (files.index_flags) {  // a set flag: an input held an index outside its tensor, the outputs are not the model's
    adreno_harness::NpyArray flags{files.index_flags->dtype.name, files.index_flags->shape,
                                   std::string(files.index_flags->bytes, '\0')};
    Stage(ADRENO_RT_RUN_FAILED, "reading the index flags",
          [&] { results.back().CopyToBytes(flags.data.data(), flags.data.size()); });
    Stage(ADRENO_RT_INDEX_OUT_OF_RANGE, "",
          [&] { adreno_harness::CheckIndexFlags(files.manifest, files.index_flags->tensor, flags); });
    results.pop_back();
  }
  return results;
}

void Model::Finish(Clock::time_point start) {
  LoadedSet& set = *loaded_[selected_];
  if (set.ran) return;
  set.ran = true;
  // the model's first run built the programs (or took the blob's): it and the wait for its outputs are part of the
  // start; a set's first run after it builds that set's
  if (!ran_) times_.first_run_ms = MsSince(start);
  ran_ = true;
  programs_->AfterFirstRun(selected_);
}

void Model::Run(const adreno_rt_view* inputs, size_t input_count, const adreno_rt_buffer* outputs,
                size_t output_count) {
  CheckInputs(inputs, input_count);
  CheckMemory(this->outputs(), outputs, output_count, {"output", "gives", "no memory"});
  auto start = Clock::now();
  std::vector<tvm::runtime::Tensor> results = Call(inputs);
  Stage(ADRENO_RT_RUN_FAILED, "reading the outputs", [&] {
    for (size_t i = 0; i < results.size(); ++i) {
      if (outputs[i].bytes > 0) results[i].CopyToBytes(outputs[i].data, outputs[i].bytes);
    }
  });
  Finish(start);
}

const std::vector<adreno_rt_view>& Model::RunOwned(const adreno_rt_view* inputs, size_t input_count) {
  CheckInputs(inputs, input_count);
  auto start = Clock::now();
  std::vector<tvm::runtime::Tensor> results = Call(inputs);
  owned_bytes_.resize(results.size());
  owned_views_.resize(results.size());
  Stage(ADRENO_RT_RUN_FAILED, "reading the outputs", [&] {
    for (size_t i = 0; i < results.size(); ++i) {
      owned_bytes_[i].resize(this->outputs()[i].bytes);
      if (!owned_bytes_[i].empty()) {
        results[i].CopyToBytes(owned_bytes_[i].data(), owned_bytes_[i].size());
      }
      owned_views_[i] = {owned_bytes_[i].data(), owned_bytes_[i].size()};
    }
  });
  Finish(start);
  return owned_views_;
}

}  // namespace adreno_rt
