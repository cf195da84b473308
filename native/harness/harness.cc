// adreno-harness: what an app does with an artifact, as a command line over libadreno_rt.so (native/rt/adreno_rt.h)
// and nothing of Python, so that every test of the harness tests the library an app links.
//
//   adreno-harness ARTIFACT --input NAME=FILE.npy ... --output-dir DIR [--blob FILE] [--device N]
//                  [--repeat N] [--plugin PATH]
//
// 1. opens the artifact through the library: TVM's OpenCL plugin, the host library (lib.so), with --blob the
//    program binaries of an earlier start when the file is for this device and these kernels and intact, the
//    weights of params.npz each in its plan scope;
// 2. reads each input from its .npy file (the model's names, manifest.json); their shapes select the artifact's
//    shape set whose inputs have exactly those (adreno_rt_select_shapes: another shape is one line listing the
//    sets), their dtypes are checked against the set's, runs once and writes each output to
//    DIR/<output name>.npy; the library rewrites the blob after a start that built anything from source;
// 3. with --repeat N, runs N more times and reports the median;
// 4. prints one JSON line: the shape set that ran, the start's stages in milliseconds, where the programs came from, and the outputs.
// Exit status: 0 on success, 2 with a one-line error (the library's status message) on bad input (an index out of
// range included: index_checks.h) or a failure.
#include <algorithm>
#include <cctype>
#include <chrono>
#include <cstdio>
#include <map>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "../rt/adreno_rt.h"
#include "npy.h"

using adreno_harness::NpyArray;

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

// A failed library call: its status message, thrown to main's one line.
void Check(adreno_rt_status status) {
  if (status.code != ADRENO_RT_OK) throw std::runtime_error(status.message);
}

struct Closer {
  void operator()(adreno_rt_model* model) const { adreno_rt_close(model); }
};
using ModelHandle = std::unique_ptr<adreno_rt_model, Closer>;

std::vector<adreno_rt_tensor_info> Ports(adreno_rt_model* model, bool inputs) {
  size_t count = 0;
  Check(inputs ? adreno_rt_input_count(model, &count) : adreno_rt_output_count(model, &count));
  std::vector<adreno_rt_tensor_info> ports(count);
  for (size_t i = 0; i < count; ++i) {
    Check(inputs ? adreno_rt_input_info(model, i, &ports[i]) : adreno_rt_output_info(model, i, &ports[i]));
  }
  return ports;
}

std::vector<int64_t> ShapeOf(const adreno_rt_tensor_info& port) { return {port.shape, port.shape + port.ndim}; }

std::string Names(const std::vector<adreno_rt_tensor_info>& ports) {
  std::string out;
  for (const adreno_rt_tensor_info& p : ports) out += (out.empty() ? "" : ", ") + std::string(p.name);
  return out;
}

std::string SafeFileName(const std::string& name) {
  std::string out = name;
  for (char& c : out) {
    if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '-' || c == '.')) c = '_';
  }
  return out.empty() || out[0] == '.' ? "_" + out : out;
}

// The process's peak resident memory in MB (VmHWM: of this program's own address space, not the parent's it was
// started from, which getrusage's ru_maxrss carries across exec), or -1 where /proc is not there.
double PeakResidentMb() {
  std::FILE* status = std::fopen("/proc/self/status", "r");
  if (status == nullptr) return -1;
  char line[256];
  double kb = -1;
  while (std::fgets(line, sizeof(line), status) != nullptr) {
    if (std::sscanf(line, "VmHWM: %lf kB", &kb) == 1) break;
  }
  std::fclose(status);
  return kb < 0 ? -1 : kb / 1024;
}

// The report's "blob" text: what happened to the file at open, and whether the first run rewrote it.
std::string BlobText(const adreno_rt_start_report& report) {
  std::string text;
  switch (report.blob) {
    case ADRENO_RT_BLOB_NOT_USED: text = "not used"; break;
    case ADRENO_RT_BLOB_ABSENT: text = "absent"; break;
    case ADRENO_RT_BLOB_LOADED: text = "loaded"; break;
    case ADRENO_RT_BLOB_REJECTED: text = std::string("rejected: ") + report.blob_rejected_because; break;
    case ADRENO_RT_BLOB_REFUSED_BY_DRIVER: text = "rejected by the driver"; break;
  }
  if (report.blob_written) text += report.blob == ADRENO_RT_BLOB_LOADED ? "; updated" : "; written";
  if (*report.blob_write_error) text += std::string("; not written: ") + report.blob_write_error;
  return text;
}

int Run(const Options& o) {
  adreno_rt_options options;
  adreno_rt_options_init(&options);
  options.device_index = o.device;
  options.blob_path = o.blob.empty() ? nullptr : o.blob.c_str();
  options.plugin_path = o.plugin.empty() ? nullptr : o.plugin.c_str();
  adreno_rt_model* opened = nullptr;
  Check(adreno_rt_open(o.artifact.c_str(), &options, &opened));
  ModelHandle model(opened);
  std::vector<adreno_rt_tensor_info> inputs = Ports(model.get(), true);

  // the inputs' files, then the shape set their shapes select (the same rule as `adreno run`'s), then their dtypes
  std::vector<NpyArray> arrays;
  for (const adreno_rt_tensor_info& port : inputs) {
    auto file = o.inputs.find(port.name);
    if (file == o.inputs.end()) {
      throw UsageError("no --input " + std::string(port.name) + "=FILE.npy (the model's inputs: " + Names(inputs) +
                       ")");
    }
    arrays.push_back(adreno_harness::ReadNpy(file->second));
  }
  for (const auto& given : o.inputs) {
    bool known = std::any_of(inputs.begin(), inputs.end(), [&](const auto& p) { return given.first == p.name; });
    if (!known) throw UsageError("--input " + given.first + ": the model has no input of that name");
  }
  std::vector<adreno_rt_shape> shapes;
  for (const NpyArray& array : arrays) shapes.push_back({static_cast<int32_t>(array.shape.size()), array.shape.data()});
  Check(adreno_rt_select_shapes(model.get(), shapes.data(), shapes.size()));
  size_t shape_set = 0;
  Check(adreno_rt_selected_shape_set(model.get(), &shape_set));
  inputs = Ports(model.get(), true);
  std::vector<adreno_rt_tensor_info> outputs = Ports(model.get(), false);
  for (size_t i = 0; i < inputs.size(); ++i) {
    if (arrays[i].dtype != inputs[i].dtype_name) {
      throw UsageError(o.inputs.at(inputs[i].name) + ": input " + inputs[i].name + " must be " +
                       inputs[i].dtype_name + " " + adreno_harness::DimsText(ShapeOf(inputs[i])));
    }
  }
  std::vector<adreno_rt_view> views;
  for (const NpyArray& array : arrays) views.push_back({array.data.data(), array.data.size()});
  std::vector<NpyArray> host(outputs.size());
  std::vector<adreno_rt_buffer> buffers;
  for (size_t i = 0; i < outputs.size(); ++i) {
    host[i].dtype = outputs[i].dtype_name;
    host[i].shape = ShapeOf(outputs[i]);
    host[i].data.resize(outputs[i].bytes);
    buffers.push_back({host[i].data.data(), host[i].data.size()});
  }
  Check(adreno_rt_run(model.get(), views.data(), views.size(), buffers.data(), buffers.size()));
  adreno_rt_start_report start;
  Check(adreno_rt_start_report_of(model.get(), &start));

  std::vector<double> runs;
  for (int r = 0; r < o.repeat; ++r) {
    auto t = std::chrono::steady_clock::now();
    Check(adreno_rt_run(model.get(), views.data(), views.size(), buffers.data(), buffers.size()));
    runs.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t).count());
  }
  std::string written;
  for (size_t i = 0; i < outputs.size(); ++i) {
    std::string path = o.output_dir + "/" + SafeFileName(outputs[i].name) + ".npy";
    adreno_harness::WriteNpy(path, host[i]);
    written += (i ? ", " : "") + JsonString(outputs[i].name) + ": " + JsonString(path);
  }
  std::sort(runs.begin(), runs.end());
  char programs[128];
  std::snprintf(programs, sizeof(programs), "from_source=%lld from_binary=%lld rejected=%lld",
                static_cast<long long>(start.programs_from_source), static_cast<long long>(start.programs_from_binary),
                static_cast<long long>(start.programs_rejected));
  std::printf("{\"device\": %s, \"shape_set\": %zu, \"plugin_ms\": %.3f, \"load_ms\": %.3f, \"blob_ms\": %.3f, \"weights_ms\": %.3f, "
              "\"first_run_ms\": %.3f, \"start_ms\": %.3f, \"verify_ms\": %.3f, \"median_ms\": %s, \"blob\": %s, "
              "\"programs\": %s, \"peak_rss_mb\": %.1f, \"outputs\": {%s}}\n",
              JsonString(start.device).c_str(), shape_set, start.plugin_ms, start.load_ms, start.blob_ms, start.weights_ms,
              start.first_run_ms,
              start.plugin_ms + start.load_ms + start.blob_ms + start.weights_ms + start.first_run_ms, start.verify_ms,
              runs.empty() ? "null" : std::to_string(runs[runs.size() / 2]).c_str(),
              JsonString(BlobText(start)).c_str(), JsonString(programs).c_str(), PeakResidentMb(), written.c_str());
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    return Run(ParseArgs(argc, argv));
  } catch (const std::exception& err) {
    std::string message = err.what();
    // TVM's errors carry a traceback after the first line; the user gets the line that says what went wrong.
    size_t newline = message.find('\n');
    std::fprintf(stderr, "error: %s\n", message.substr(0, newline).c_str());
    return 2;
  }
}
