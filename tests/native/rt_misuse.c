/* Bad use of the C API, each answered by a status (tests/native/test_rt_api.py builds this with AddressSanitizer):
 *
 *   rt_misuse GOOD_ARTIFACT MISSING_DIR TAMPERED_MANIFEST_DIR TAMPERED_WEIGHTS_DIR
 *
 * prints one line per call, "<what> <code> <message>", and exits 0 when no call crashed. */
#include <stdio.h>
#include <string.h>

#include "adreno_rt.h"

static void show(const char* what, adreno_rt_status status) {
  printf("%s %d %s\n", what, (int)status.code, status.message);
}

int main(int argc, char** argv) {
  if (argc != 5) return 2;
  adreno_rt_model* model = NULL;
  adreno_rt_options options;
  adreno_rt_options_init(&options);
  options.plugin_path = "/nonexistent/libtvm_runtime_opencl.so"; /* first: no plugin is loaded yet */
  show("missing_plugin", adreno_rt_open(argv[1], &options, &model));
  show("missing_dir", adreno_rt_open(argv[2], NULL, &model));
  show("tampered_manifest", adreno_rt_open(argv[3], NULL, &model));
  show("tampered_weights", adreno_rt_open(argv[4], NULL, &model));
  show("null_dir", adreno_rt_open(NULL, NULL, &model));
  show("null_handle_out", adreno_rt_open(argv[1], NULL, NULL));
  adreno_rt_options_init(&options);
  options.device_index = 99;
  show("no_such_device", adreno_rt_open(argv[1], &options, &model));
  adreno_rt_options_init(&options);
  options.device_name = "no such device";
  show("no_device_named", adreno_rt_open(argv[1], &options, &model));
  options.device_name = "Portable Computing Language";
  show("device_by_name", adreno_rt_open(argv[1], &options, &model));
  show("close_by_name", adreno_rt_close(model));

  show("open", adreno_rt_open(argv[1], NULL, &model));
  adreno_rt_tensor_info info;
  show("input_info_null", adreno_rt_input_info(model, 0, NULL));
  show("input_info_range", adreno_rt_input_info(model, 7, &info));
  show("input_info", adreno_rt_input_info(model, 0, &info));
  static float input[1 << 16], output[1 << 16];
  adreno_rt_view short_input = {input, info.bytes - 4};
  adreno_rt_buffer out = {output, sizeof(output)};
  show("wrong_input_size", adreno_rt_run(model, &short_input, 1, &out, 1));
  show("null_inputs", adreno_rt_run(model, NULL, 1, &out, 1));
  adreno_rt_view null_data = {NULL, info.bytes};
  show("null_input_data", adreno_rt_run(model, &null_data, 1, &out, 1));
  adreno_rt_view good_input = {input, info.bytes};
  show("wrong_output_size", adreno_rt_run(model, &good_input, 1, &out, 1));
  show("wrong_input_count", adreno_rt_run(model, &good_input, 2, &out, 1));
  show("null_owned_outputs", adreno_rt_run_owned(model, &good_input, 1, NULL));
  adreno_rt_shape same = {info.ndim, info.shape}, no_dims = {2, NULL};
  show("select_own_shape", adreno_rt_select_shapes(model, &same, 1));
  show("select_null_shapes", adreno_rt_select_shapes(model, NULL, 1));
  show("select_null_dims", adreno_rt_select_shapes(model, &no_dims, 1));
  show("select_wrong_count", adreno_rt_select_shapes(model, &same, 0));
  show("shape_set_info_range", adreno_rt_shape_set_input_info(model, 1, 0, &info));
  show("close", adreno_rt_close(model));
  show("run_after_close", adreno_rt_run(model, &good_input, 1, &out, 1));
  show("info_after_close", adreno_rt_input_info(model, 0, &info));
  show("second_close", adreno_rt_close(model));
  show("null_close", adreno_rt_close(NULL));
  show("null_run", adreno_rt_run(NULL, &good_input, 1, &out, 1));
  return 0;
}
