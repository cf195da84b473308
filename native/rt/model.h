// One opened artifact: its weights uploaded once, and for each shape set that has been selected, that set's host
// library's Relax VM on the OpenCL device with its input tensors allocated once; one set is selected, and the
// ports and runs are that set's. Where the programs came from across sets (program_cache.h). Not synchronised:
// the C API serialises the calls on a model.
#ifndef ADRENO_RT_MODEL_H_
#define ADRENO_RT_MODEL_H_

#include <tvm/ffi/any.h>
#include <tvm/ffi/extra/module.h>
#include <tvm/ffi/function.h>
#include <tvm/runtime/tensor.h>

#include <chrono>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "adreno_rt.h"
#include "artifact_files.h"
#include "program_cache.h"

namespace adreno_rt {

struct OpenOptions {
  int device_index = 0;
  std::string device_name, blob_path, plugin_path;
  bool write_blob = true;
  int weight_threads = 0;
};

struct StartTimes {
  double plugin_ms = 0, load_ms = 0, blob_ms = 0, weights_ms = 0, first_run_ms = 0;
  double verify_ms = 0;  // of the stages above: proving the artifact whole
};

class Model {
 public:
  // Throws RtError: the plugin, the artifact's files, the device, the weights, the first set's library.
  Model(const std::string& dir, const OpenOptions& options);

  size_t set_count() const { return files_.sets.size(); }
  size_t selected() const { return selected_; }
  const std::vector<Port>& inputs_of(size_t set) const { return files_.sets.at(set).inputs; }
  const std::vector<Port>& inputs() const { return inputs_of(selected_); }
  const std::vector<Port>& outputs() const { return files_.sets[selected_].outputs; }
  const std::string& device() const { return identity_; }
  const StartTimes& times() const { return times_; }
  const ProgramCache& programs() const { return *programs_; }

  // Selects the set whose inputs have exactly `shapes` (one per input, in order), loading it at its first
  // selection; INVALID_ARGUMENT listing the sets when none has them, and the selection is kept on any failure.
  void SelectShapes(const std::vector<std::vector<int64_t>>& shapes);

  // Runs the selected set once on `inputs` (the inputs' exact sizes, in order) and copies each output into `outputs`.
  void Run(const adreno_rt_view* inputs, size_t input_count, const adreno_rt_buffer* outputs, size_t output_count);
  // Runs once; the outputs are the model's copies, valid until the next run.
  const std::vector<adreno_rt_view>& RunOwned(const adreno_rt_view* inputs, size_t input_count);

 private:
  // A set's host library on the device, loaded at its first selection.
  struct LoadedSet {
    std::optional<tvm::ffi::Module> vm;  // the Relax VM
    tvm::ffi::Function main;
    std::vector<tvm::ffi::Any> args;  // the input tensors, then the weights (the model's, shared)
    bool ran = false;
  };
  // Proves set `set`'s code and loads it (its library, VM, programs, inputs) unless it is loaded.
  LoadedSet& Load(size_t set);
  void CheckInputs(const adreno_rt_view* inputs, size_t count) const;
  // Uploads the inputs, calls main, returns its results as tensors in the plan's output order.
  std::vector<tvm::runtime::Tensor> Call(const adreno_rt_view* inputs);
  // After a run's outputs are read: the first run's time, and the blob rewritten if the set's first run built any.
  void Finish(std::chrono::steady_clock::time_point start);

  std::string dir_;
  ArtifactFiles files_;
  std::string identity_;
  int device_id_ = 0;
  StartTimes times_;
  std::unique_ptr<ProgramCache> programs_;
  std::vector<tvm::ffi::Any> weights_;          // every set's weights, each distinct device tensor once
  std::vector<std::vector<size_t>> weight_of_;  // [set][k]: set's k-th weight in weights_
  std::vector<std::unique_ptr<LoadedSet>> loaded_;  // per set; null until first selected
  size_t selected_ = 0;
  bool ran_ = false;
  std::vector<std::string> owned_bytes_;
  std::vector<adreno_rt_view> owned_views_;
};

}  // namespace adreno_rt

#endif  // ADRENO_RT_MODEL_H_
