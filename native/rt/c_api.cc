// The C ABI over Model: handles, statuses and messages. A handle is a number from a counter that is never reused,
// looked up in a registry of open models, so a closed or made-up handle is a status, never a dangling pointer.
// Each open model has a mutex: its calls are serialised, and a close waits for a run in progress.
#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "adreno_rt.h"
#include "model.h"
#include "rt_error.h"

namespace adreno_rt {

std::string FirstLine(const std::exception& error) {
  std::string message = error.what();
  size_t newline = message.find('\n');
  return newline == std::string::npos ? message : message.substr(0, newline);
}

namespace {

struct OpenModel {
  std::mutex lock;
  std::unique_ptr<Model> model;
};

std::mutex registry_lock;
std::map<uintptr_t, std::shared_ptr<OpenModel>> registry;
uintptr_t last_handle = 0;

thread_local std::string last_message;

adreno_rt_status Status(adreno_rt_code code, const std::string& message) {
  last_message = message;
  return {code, last_message.c_str()};
}

// Runs `body` and turns whatever it throws into a status: nothing crosses the C ABI.
template <typename Body>
adreno_rt_status Guarded(const Body& body) {
  try {
    body();
    return Status(ADRENO_RT_OK, "");
  } catch (const RtError& error) {
    return Status(error.code(), error.what());
  } catch (const std::bad_alloc&) {
    return Status(ADRENO_RT_DEVICE, "out of host memory");
  } catch (const std::exception& error) {
    return Status(ADRENO_RT_RUN_FAILED, FirstLine(error));
  } catch (...) {
    return Status(ADRENO_RT_RUN_FAILED, "an unknown C++ exception");
  }
}

void Require(const void* pointer, const char* what) {
  if (pointer == nullptr) throw RtError(ADRENO_RT_INVALID_ARGUMENT, std::string(what) + " is NULL");
}

std::shared_ptr<OpenModel> Find(adreno_rt_model* handle) {
  std::lock_guard<std::mutex> guard(registry_lock);
  auto found = registry.find(reinterpret_cast<uintptr_t>(handle));
  if (found == registry.end()) {
    throw RtError(ADRENO_RT_CLOSED, handle == nullptr ? "the model is NULL (not opened)"
                                                      : "the model is closed (or was never opened)");
  }
  return found->second;
}

// Calls body(model) with the model's lock held.
template <typename Body>
adreno_rt_status WithModel(adreno_rt_model* handle, const Body& body) {
  return Guarded([&] {
    std::shared_ptr<OpenModel> open = Find(handle);
    std::lock_guard<std::mutex> guard(open->lock);
    if (!open->model) throw RtError(ADRENO_RT_CLOSED, "the model is closed");
    body(*open);
  });
}

void Describe(const Port& port, adreno_rt_tensor_info* info) {
  info->name = port.name.c_str();
  info->dtype = port.dtype.api;
  info->dtype_name = port.dtype.name.c_str();
  info->ndim = static_cast<int32_t>(port.shape.size());
  info->shape = port.shape.data();
  info->bytes = port.bytes;
}

const Port& PortAt(const std::vector<Port>& ports, size_t index, const char* which) {
  if (index >= ports.size()) {
    throw RtError(ADRENO_RT_INVALID_ARGUMENT, std::string("no ") + which + " " + std::to_string(index) +
                                                  " (the model has " + std::to_string(ports.size()) + ")");
  }
  return ports[index];
}

}  // namespace

}  // namespace adreno_rt

using adreno_rt::Guarded;
using adreno_rt::OpenModel;
using adreno_rt::Require;
using adreno_rt::RtError;
using adreno_rt::WithModel;

extern "C" {

void adreno_rt_options_init(adreno_rt_options* options) {
  if (options == nullptr) return;
  std::memset(options, 0, sizeof(*options));
  options->write_blob = 1;
}

adreno_rt_status adreno_rt_open(const char* artifact_dir, const adreno_rt_options* options,
                                adreno_rt_model** model) {
  return Guarded([&] {
    Require(model, "model (where the handle goes)");
    *model = nullptr;
    Require(artifact_dir, "artifact_dir");
    adreno_rt::OpenOptions open;
    if (options != nullptr) {
      if (options->device_index < 0) throw RtError(ADRENO_RT_INVALID_ARGUMENT, "device_index is negative");
      if (options->weight_threads < 0) throw RtError(ADRENO_RT_INVALID_ARGUMENT, "weight_threads is negative");
      open.device_index = options->device_index;
      open.device_name = options->device_name ? options->device_name : "";
      open.blob_path = options->blob_path ? options->blob_path : "";
      open.write_blob = options->write_blob != 0;
      open.weight_threads = options->weight_threads;
      open.plugin_path = options->plugin_path ? options->plugin_path : "";
    }
    auto entry = std::make_shared<OpenModel>();
    entry->model = std::make_unique<adreno_rt::Model>(artifact_dir, open);
    std::lock_guard<std::mutex> guard(adreno_rt::registry_lock);
    uintptr_t handle = ++adreno_rt::last_handle;
    adreno_rt::registry[handle] = entry;
    *model = reinterpret_cast<adreno_rt_model*>(handle);
  });
}

adreno_rt_status adreno_rt_shape_set_count(adreno_rt_model* model, size_t* count) {
  return WithModel(model, [&](OpenModel& open) {
    Require(count, "count");
    *count = open.model->set_count();
  });
}

adreno_rt_status adreno_rt_shape_set_input_info(adreno_rt_model* model, size_t set, size_t index,
                                                adreno_rt_tensor_info* info) {
  return WithModel(model, [&](OpenModel& open) {
    Require(info, "info");
    if (set >= open.model->set_count()) {
      throw RtError(ADRENO_RT_INVALID_ARGUMENT, "no shape set " + std::to_string(set) + " (the model has " +
                                                    std::to_string(open.model->set_count()) + ")");
    }
    adreno_rt::Describe(adreno_rt::PortAt(open.model->inputs_of(set), index, "input"), info);
  });
}

adreno_rt_status adreno_rt_select_shapes(adreno_rt_model* model, const adreno_rt_shape* shapes, size_t count) {
  return WithModel(model, [&](OpenModel& open) {
    if (count > 0) Require(shapes, "shapes");
    std::vector<std::vector<int64_t>> given;
    for (size_t i = 0; i < count; ++i) {
      if (shapes[i].ndim < 0 || (shapes[i].ndim > 0 && shapes[i].shape == nullptr)) {
        throw RtError(ADRENO_RT_INVALID_ARGUMENT, "shape " + std::to_string(i) + " has ndim " +
                                                      std::to_string(shapes[i].ndim) + " and its dimensions " +
                                                      (shapes[i].shape ? "given" : "NULL"));
      }
      given.emplace_back(shapes[i].shape, shapes[i].shape + shapes[i].ndim);
    }
    open.model->SelectShapes(given);
  });
}

adreno_rt_status adreno_rt_selected_shape_set(adreno_rt_model* model, size_t* set) {
  return WithModel(model, [&](OpenModel& open) {
    Require(set, "set");
    *set = open.model->selected();
  });
}

adreno_rt_status adreno_rt_input_count(adreno_rt_model* model, size_t* count) {
  return WithModel(model, [&](OpenModel& open) {
    Require(count, "count");
    *count = open.model->inputs().size();
  });
}

adreno_rt_status adreno_rt_output_count(adreno_rt_model* model, size_t* count) {
  return WithModel(model, [&](OpenModel& open) {
    Require(count, "count");
    *count = open.model->outputs().size();
  });
}

adreno_rt_status adreno_rt_input_info(adreno_rt_model* model, size_t index, adreno_rt_tensor_info* info) {
  return WithModel(model, [&](OpenModel& open) {
    Require(info, "info");
    adreno_rt::Describe(adreno_rt::PortAt(open.model->inputs(), index, "input"), info);
  });
}

adreno_rt_status adreno_rt_output_info(adreno_rt_model* model, size_t index, adreno_rt_tensor_info* info) {
  return WithModel(model, [&](OpenModel& open) {
    Require(info, "info");
    adreno_rt::Describe(adreno_rt::PortAt(open.model->outputs(), index, "output"), info);
  });
}

adreno_rt_status adreno_rt_run(adreno_rt_model* model, const adreno_rt_view* inputs, size_t input_count,
                               const adreno_rt_buffer* outputs, size_t output_count) {
  return WithModel(model, [&](OpenModel& open) { open.model->Run(inputs, input_count, outputs, output_count); });
}

adreno_rt_status adreno_rt_run_owned(adreno_rt_model* model, const adreno_rt_view* inputs, size_t input_count,
                                     const adreno_rt_view** outputs) {
  return WithModel(model, [&](OpenModel& open) {
    Require(outputs, "outputs (where the outputs' address goes)");
    *outputs = nullptr;
    *outputs = open.model->RunOwned(inputs, input_count).data();
  });
}

adreno_rt_status adreno_rt_start_report_of(adreno_rt_model* model, adreno_rt_start_report* report) {
  return WithModel(model, [&](OpenModel& open) {
    Require(report, "report");
    const adreno_rt::Model& m = *open.model;
    const adreno_rt::ProgramCache& programs = m.programs();
    adreno_rt::ProgramCounts counts = programs.Counts();
    // the model's own strings, set once (at open, or at the first run for a write error) and kept until close
    report->device = m.device().c_str();
    report->blob = programs.state();
    report->blob_rejected_because = programs.rejected_because().c_str();
    report->blob_written = programs.written() ? 1 : 0;
    report->blob_write_error = programs.write_error().empty() ? "" : programs.write_error().c_str();
    report->programs_from_source = counts.from_source;
    report->programs_from_binary = counts.from_binary;
    report->programs_rejected = counts.rejected;
    report->plugin_ms = m.times().plugin_ms;
    report->load_ms = m.times().load_ms;
    report->blob_ms = m.times().blob_ms;
    report->weights_ms = m.times().weights_ms;
    report->first_run_ms = m.times().first_run_ms;
    report->verify_ms = m.times().verify_ms;
  });
}

adreno_rt_status adreno_rt_close(adreno_rt_model* model) {
  return Guarded([&] {
    std::shared_ptr<OpenModel> open;
    {
      std::lock_guard<std::mutex> guard(adreno_rt::registry_lock);
      auto found = adreno_rt::registry.find(reinterpret_cast<uintptr_t>(model));
      if (found == adreno_rt::registry.end()) {
        throw RtError(ADRENO_RT_CLOSED, model == nullptr ? "the model is NULL (not opened)"
                                                         : "the model is closed already (or was never opened)");
      }
      open = found->second;
      adreno_rt::registry.erase(found);
    }
    std::lock_guard<std::mutex> guard(open->lock);  // waits for a run in progress
    open->model.reset();
  });
}

}  // extern "C"
