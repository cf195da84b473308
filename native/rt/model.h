// One opened artifact: the host library's Relax VM on an OpenCL device, its weights uploaded, its input tensors
// allocated once, and where its programs came from. Not synchronised: the C API serialises the calls on a model.
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
  // Throws RtError: the plugin, the artifact's files, the device, the weights.
  Model(const std::string& dir, const OpenOptions& options);

  const std::vector<Port>& inputs() const { return files_.inputs; }
  const std::vector<Port>& outputs() const { return files_.outputs; }
  const std::string& device() const { return identity_; }
  const StartTimes& times() const { return times_; }
  const ProgramCache& programs() const { return *programs_; }

  // Runs once on `inputs` (the inputs' exact sizes, in order) and copies each output into `outputs`.
  void Run(const adreno_rt_view* inputs, size_t input_count, const adreno_rt_buffer* outputs, size_t output_count);
  // Runs once; the outputs are the model's copies, valid until the next run.
  const std::vector<adreno_rt_view>& RunOwned(const adreno_rt_view* inputs, size_t input_count);

 private:
  void CheckInputs(const adreno_rt_view* inputs, size_t count) const;
  // Uploads the inputs, calls main, returns its results as tensors in the plan's output order.
  std::vector<tvm::runtime::Tensor> Call(const adreno_rt_view* inputs);
  // After a run's outputs are read: the first run's time, and the blob rewritten if it built anything.
  void Finish(std::chrono::steady_clock::time_point start);

  ArtifactFiles files_;
  std::string identity_;
  int device_id_ = 0;
  StartTimes times_;
  std::optional<tvm::ffi::Module> vm_;  // the Relax VM (set once the constructor loads it)
  tvm::ffi::Function main_;
  std::unique_ptr<ProgramCache> programs_;
  std::vector<tvm::ffi::Any> args_;  // the input tensors, then the weights
  bool ran_ = false;
  std::vector<std::string> owned_bytes_;
  std::vector<adreno_rt_view> owned_views_;
};

}  // namespace adreno_rt

#endif  // ADRENO_RT_MODEL_H_
