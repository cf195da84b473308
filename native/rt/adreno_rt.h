/* adreno_rt.h: the C API of libadreno_rt.so, what an app links to run an adreno artifact (a directory compiled with
 * `adreno compile --host native`, or for a phone with the NDK) on an OpenCL device through TVM's runtime and
 * adreno's OpenCL plugin (libtvm_runtime_opencl.so).
 *
 * The library does what every app would otherwise redo: loads the plugin and the host library (lib.so; of an
 * artifact of several shape sets, the library of each set it selects), uploads the weights of params.npz into their
 * plan scopes (images for texture tensors, half pixels for fp16 artifacts), takes the OpenCL program binaries of an
 * earlier start from the blob file when it is for this device and these kernels and intact, and rewrites that file
 * atomically after a start (of a shape set: that set's first run) that built anything from source.
 *
 * Conventions:
 *  - Every call returns an adreno_rt_status. `message` is "" on success, otherwise one readable line naming what
 *    failed (the file, the OpenCL call, TVM's error); it stays valid until the next call into the library on the
 *    same thread. Nothing aborts the process and no C++ exception crosses this API. (A TVM runtime built with its
 *    own OpenCL, USE_OPENCL ON, is refused with ADRENO_RT_NO_RUNTIME: loading the plugin beside it would abort.)
 *  - A model handle is an opaque number, never dereferenced: a handle that is closed (or was never opened) gives
 *    ADRENO_RT_CLOSED, a second close included.
 *  - Threads: a model is safe to use from several threads. Its calls are serialised by a mutex of its own (a run
 *    waits for another thread's run of the same model); different models run concurrently. A close waits for a
 *    run in progress on another thread.
 *  - Pointers the library hands out (names, shapes, model-owned outputs, report strings) stay valid until the
 *    model is closed, model-owned outputs only until its next run.
 */
#ifndef ADRENO_RT_H_
#define ADRENO_RT_H_

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#if defined(_WIN32)
#define ADRENO_RT_API
#else
#define ADRENO_RT_API __attribute__((visibility("default")))
#endif

typedef enum {
  ADRENO_RT_OK = 0,
  /* a null pointer, a wrong count or byte size, an index out of range, an option out of range */
  ADRENO_RT_INVALID_ARGUMENT = 1,
  /* the artifact directory is missing, or a file of it (manifest.json, plan.json, params.npz, lib.so) is
   * unreadable, damaged or inconsistent with the others, or it holds no library this machine can load */
  ADRENO_RT_BAD_ARTIFACT = 2,
  /* TVM's runtime or adreno's OpenCL plugin cannot be loaded (a missing or foreign libtvm_runtime_opencl.so) */
  ADRENO_RT_NO_RUNTIME = 3,
  /* no OpenCL device, no device of that index or name, or an OpenCL call failed (allocation, upload, build) */
  ADRENO_RT_DEVICE = 4,
  /* the host library failed while running (TVM's error, first line) */
  ADRENO_RT_RUN_FAILED = 5,
  /* the handle is closed, or was never returned by adreno_rt_open */
  ADRENO_RT_CLOSED = 6,
  /* an input held an index outside the tensor it indexes (a Gather's, a Scatter's, ...), which ONNX makes an error:
   * the run's outputs are not the model's and were not written; the message names the node */
  ADRENO_RT_INDEX_OUT_OF_RANGE = 7
} adreno_rt_code;

typedef struct {
  adreno_rt_code code;
  const char* message; /* "" on success; valid until the next call on this thread */
} adreno_rt_status;

typedef struct adreno_rt_model adreno_rt_model; /* opaque */

typedef struct {
  /* The OpenCL device: the first whose "platform|device|driver" contains device_name when that is set and not
   * empty, else the device_index-th of every platform's devices (0: the first). */
  int device_index;
  const char* device_name;
  /* The program-binary file (the blob): NULL for none. Kept in the app's private storage. */
  const char* blob_path;
  /* 1: rewrite blob_path atomically after a first run that built any program from source; 0: only read it. */
  int write_blob;
  /* Threads for rebuilding the stored weights at open (Winograd transforms): 0 for one per core. */
  int weight_threads;
  /* adreno's OpenCL plugin: NULL for libtvm_runtime_opencl.so in the directory of libadreno_rt.so. Loaded once per
   * process: when TVM's runtime has it already (an earlier open, the app linked or loaded it), this is not read. */
  const char* plugin_path;
} adreno_rt_options;

typedef enum {
  ADRENO_RT_FLOAT32 = 0,
  ADRENO_RT_FLOAT16 = 1,
  ADRENO_RT_INT64 = 2,
  ADRENO_RT_INT32 = 3,
  ADRENO_RT_INT8 = 4,
  ADRENO_RT_UINT8 = 5,
  ADRENO_RT_BOOL = 6 /* one byte per element */
} adreno_rt_dtype;

typedef struct {
  const char* name;       /* the model's own name (ONNX, as in manifest.json) */
  adreno_rt_dtype dtype;
  const char* dtype_name; /* "float32", "float16", "int64", "int32", "int8", "uint8", "bool" */
  int32_t ndim;
  const int64_t* shape;   /* ndim dimensions */
  size_t bytes;           /* element size x elements: the exact size run() takes or gives for it */
} adreno_rt_tensor_info;

/* Bytes of one tensor, C order, in its dtype: an input, or an output the model owns. */
typedef struct {
  const void* data;
  size_t bytes;
} adreno_rt_view;

/* Caller memory an output is written to. */
typedef struct {
  void* data;
  size_t bytes;
} adreno_rt_buffer;

typedef enum {
  ADRENO_RT_BLOB_NOT_USED = 0, /* no blob_path, or the library has no OpenCL kernels */
  ADRENO_RT_BLOB_ABSENT = 1,   /* no file at blob_path yet */
  ADRENO_RT_BLOB_LOADED = 2,   /* its programs were taken */
  ADRENO_RT_BLOB_REJECTED = 3, /* the file was not offered to the driver: blob_rejected_because says why */
  ADRENO_RT_BLOB_REFUSED_BY_DRIVER = 4 /* offered, and the driver built none of its binaries */
} adreno_rt_blob_state;

typedef struct {
  const char* device; /* "platform|device|driver" of the model's device */
  adreno_rt_blob_state blob;
  /* ADRENO_RT_BLOB_REJECTED: "for another device or kernels", "truncated", "checksum mismatch",
   * "not a program-binary file", "format version N, ..." or a read error; otherwise "" */
  const char* blob_rejected_because;
  int blob_written;             /* 1 once a set's first run built programs from source and the blob was rewritten */
  const char* blob_write_error; /* "" or why rewriting it failed (the run itself succeeded) */
  /* the model's OpenCL programs so far, of every set that has been selected (built at a set's first run): from
   * source, from the blob's binaries, and the blob's binaries the driver refused */
  int64_t programs_from_source, programs_from_binary, programs_rejected;
  /* the start's stages in milliseconds; first_run_ms is 0 before the first run */
  double plugin_ms, load_ms, blob_ms, weights_ms, first_run_ms;
  /* of those, proving the artifact whole (manifest run_sha256, the files' SHA-256, kernel contracts) */
  double verify_ms;
} adreno_rt_start_report;

/* Defaults: device 0, no device name, no blob (write_blob 1 once a path is set), weight threads one per core,
 * the plugin beside the library. */
ADRENO_RT_API void adreno_rt_options_init(adreno_rt_options* options);

/* Opens the artifact directory: the plugin (once per process), the blob (if any), the weights, the first shape
 * set's lib.so on the device. `options` may be NULL for the defaults. On success *model is a handle; on failure it is NULL. */
ADRENO_RT_API adreno_rt_status adreno_rt_open(const char* artifact_dir, const adreno_rt_options* options,
                                              adreno_rt_model** model);

/* Shape sets. An artifact compiled for several static shapes (`adreno compile --input-shape x:1,3,48,160
 * --input-shape x:1,3,48,320 ...`, docs/shapes.md) holds one shape set per compile of them: every set takes the
 * model's inputs, in the same order and dtypes, each at its own shape, and has its own host library; the weights are
 * shared (uploaded once at open: a weight that several sets take in the same form is one device tensor). An artifact
 * of one shape has one set. One set is selected at a time, the first at open: adreno_rt_input_info, output_info,
 * run and run_owned are the selected set's. Selecting another set is what `adreno run` does with an input of that
 * shape; padding a request to the next shape the artifact has is the app's choice (docs/app.md).
 *
 * Every set's plan.json is proved (size and SHA-256) at open; a set's code, its plan's steps against their kernels'
 * contracts and its lib.so (size, SHA-256, ELF headers), is proved at its first selection (the first set, selected
 * at open: at its first selection or first run), just before its library is loaded, and a failure is
 * ADRENO_RT_BAD_ARTIFACT from adreno_rt_select_shapes (the selection is kept) or from that run: an app that runs one
 * shape pays for hashing and loading one library, whichever set it is, and a damaged set stops only the runs of
 * its shape. (An artifact of one shape is proved and loaded whole at open, as always.) A set's load, blob and
 * verify times are added to the start report when it is loaded, and its programs are built at its first run (or
 * taken from the blob, which holds the programs of every set that has run).
 *
 * The selected set is the model's, not the calling thread's: threads that run different shapes on one model hold
 * a lock of their own around select and run. */

/* The shape sets of the artifact: 1 for an artifact of one shape. */
ADRENO_RT_API adreno_rt_status adreno_rt_shape_set_count(adreno_rt_model* model, size_t* count);

/* Input `index` of set `set` (in run()'s order), as adreno_rt_input_info describes the selected set's. */
ADRENO_RT_API adreno_rt_status adreno_rt_shape_set_input_info(adreno_rt_model* model, size_t set, size_t index,
                                                              adreno_rt_tensor_info* info);

/* One input's shape for adreno_rt_select_shapes. */
typedef struct {
  int32_t ndim;
  const int64_t* shape; /* ndim dimensions */
} adreno_rt_shape;

/* Selects the set whose inputs have exactly these shapes (one per input, in run()'s order), as `adreno run` chooses
 * a set for its inputs. No such set: ADRENO_RT_INVALID_ARGUMENT, the message one line listing the artifact's sets
 * ("no shape set of this artifact takes x 1x3x48x200; it was compiled for x 1x3x48x160; x 1x3x48x320 (...)"). On
 * any failure the selected set stays selected. */
ADRENO_RT_API adreno_rt_status adreno_rt_select_shapes(adreno_rt_model* model, const adreno_rt_shape* shapes,
                                                       size_t count);

/* The selected set's index (0 at open). */
ADRENO_RT_API adreno_rt_status adreno_rt_selected_shape_set(adreno_rt_model* model, size_t* set);

/* The selected shape set's inputs and outputs, in the order run() takes and gives them. */
ADRENO_RT_API adreno_rt_status adreno_rt_input_count(adreno_rt_model* model, size_t* count);
ADRENO_RT_API adreno_rt_status adreno_rt_output_count(adreno_rt_model* model, size_t* count);
ADRENO_RT_API adreno_rt_status adreno_rt_input_info(adreno_rt_model* model, size_t index,
                                                    adreno_rt_tensor_info* info);
ADRENO_RT_API adreno_rt_status adreno_rt_output_info(adreno_rt_model* model, size_t index,
                                                     adreno_rt_tensor_info* info);

/* Runs the selected set once: every input (count and bytes exactly as adreno_rt_input_info says) is copied from the caller's
 * memory to the device, every output from the device into the caller's memory (exact sizes too). */
ADRENO_RT_API adreno_rt_status adreno_rt_run(adreno_rt_model* model, const adreno_rt_view* inputs,
                                             size_t input_count, const adreno_rt_buffer* outputs,
                                             size_t output_count);

/* Runs once and sets *outputs to the model's own copies of the outputs (adreno_rt_output_count of them), valid
 * until the model's next run or close. */
ADRENO_RT_API adreno_rt_status adreno_rt_run_owned(adreno_rt_model* model, const adreno_rt_view* inputs,
                                                   size_t input_count, const adreno_rt_view** outputs);

/* How the start went: where the programs came from, what happened to the blob, the stages' times. */
ADRENO_RT_API adreno_rt_status adreno_rt_start_report_of(adreno_rt_model* model, adreno_rt_start_report* report);

/* Releases the model (device memory, programs). The handle is closed after this, whatever it returns. */
ADRENO_RT_API adreno_rt_status adreno_rt_close(adreno_rt_model* model);

#ifdef __cplusplus
}
#endif

#endif /* ADRENO_RT_H_ */
