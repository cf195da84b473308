/* The C API's shape-set check program (tests/native/test_rt_shapes.py compiles it against native/rt/adreno_rt.h):
 *
 *   rt_shapes ARTIFACT IO_DIR BLOB|- STEP...
 *
 * opens ARTIFACT (with the blob file BLOB, or none for "-") and takes each STEP in turn: a set index K selects the
 * shapes of set K's inputs (adreno_rt_shape_set_input_info, adreno_rt_select_shapes), reads input i from
 * IO_DIR/set<K>_in<i>.bin, runs it and writes output i to IO_DIR/step<J>_out<i>.bin (J: the step's position); a
 * step "shape:D0xD1x..." selects that shape for the model's one input and runs nothing. A selection's status is
 * recorded, not fatal: a failed one runs nothing. Prints one JSON line (each set's input shapes, each step's
 * status and selected set, the start report); exit 0, or 1 with the failing call's status message on stderr. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "rt_common.h"

static void print_string(const char* text) {
  putchar('"');
  for (; *text; ++text) {
    if (*text == '"' || *text == '\\') putchar('\\');
    putchar(*text);
  }
  putchar('"');
}

/* Runs the selected set on IO_DIR/set<set>_in<i>.bin and writes IO_DIR/step<step>_out<i>.bin. */
static void run_selected(adreno_rt_model* model, const char* io_dir, size_t set, int step) {
  size_t input_count = 0, output_count = 0;
  check(adreno_rt_input_count(model, &input_count), "input_count");
  check(adreno_rt_output_count(model, &output_count), "output_count");
  char path[4096];
  snprintf(path, sizeof(path), "%s/set%zu_", io_dir, set);
  adreno_rt_view* inputs = read_inputs(model, path, input_count);
  adreno_rt_buffer* outputs = calloc(output_count + 1, sizeof(adreno_rt_buffer));
  allocate_outputs(model, outputs, output_count);
  check(adreno_rt_run(model, inputs, input_count, outputs, output_count), "run");
  for (size_t i = 0; i < output_count; ++i) {
    snprintf(path, sizeof(path), "%s/step%d_out%zu.bin", io_dir, step, i);
    FILE* f = fopen(path, "wb");
    if (!f || fwrite(outputs[i].data, 1, outputs[i].bytes, f) != outputs[i].bytes) exit(1);
    fclose(f);
    free(outputs[i].data);
  }
  for (size_t i = 0; i < input_count; ++i) free((void*)inputs[i].data);
  free(inputs);
  free(outputs);
}

int main(int argc, char** argv) {
  if (argc < 4) {
    fprintf(stderr, "usage: rt_shapes ARTIFACT IO_DIR BLOB|- STEP...\n");
    return 2;
  }
  adreno_rt_options options;
  adreno_rt_model* model = open_model(argv[1], argv[3], &options);
  size_t sets = 0, input_count = 0;
  check(adreno_rt_shape_set_count(model, &sets), "shape_set_count");
  check(adreno_rt_input_count(model, &input_count), "input_count");
  printf("{\"sets\": [");
  for (size_t s = 0; s < sets; ++s) {
    printf("%s[", s ? ", " : "");
    for (size_t i = 0; i < input_count; ++i) {
      adreno_rt_tensor_info info;
      check(adreno_rt_shape_set_input_info(model, s, i, &info), "shape_set_input_info");
      printf("%s[", i ? ", " : "");
      for (int32_t d = 0; d < info.ndim; ++d) printf("%s%lld", d ? ", " : "", (long long)info.shape[d]);
      printf("]");
    }
    printf("]");
  }
  printf("], \"steps\": [");
  for (int step = 4; step < argc; ++step) {
    int64_t dims[16][8];
    adreno_rt_shape shapes[16];
    adreno_rt_tensor_info info;
    size_t set = 0;
    if (strncmp(argv[step], "shape:", 6) == 0) {
      shapes[0].ndim = 0;
      shapes[0].shape = dims[0];
      for (char* d = argv[step] + 6; *d && shapes[0].ndim < 8; d = strchr(d, 'x') ? strchr(d, 'x') + 1 : "") {
        dims[0][shapes[0].ndim++] = atoll(d);
      }
      input_count = 1;
    } else {
      set = (size_t)atoi(argv[step]);
      check(adreno_rt_input_count(model, &input_count), "input_count");
      for (size_t i = 0; i < input_count && i < 16; ++i) {
        check(adreno_rt_shape_set_input_info(model, set, i, &info), "shape_set_input_info");
        shapes[i].ndim = info.ndim;
        shapes[i].shape = info.shape;
      }
    }
    adreno_rt_status status = adreno_rt_select_shapes(model, shapes, input_count);
    printf("%s{\"code\": %d, \"message\": ", step > 4 ? ", " : "", (int)status.code);
    print_string(status.message);  /* valid until the next call */
    size_t selected = 0;
    check(adreno_rt_selected_shape_set(model, &selected), "selected_shape_set");
    printf(", \"selected\": %zu}", selected);
    if (status.code == ADRENO_RT_OK && strncmp(argv[step], "shape:", 6) != 0) {
      run_selected(model, argv[2], set, step - 4);
    }
  }
  adreno_rt_start_report report;
  check(adreno_rt_start_report_of(model, &report), "start_report");
  printf("], \"blob\": \"%s\", \"rejected_because\": \"%s\", \"written\": %d, \"from_source\": %lld, "
         "\"from_binary\": %lld}\n", kBlobStates[report.blob], report.blob_rejected_because, report.blob_written,
         (long long)report.programs_from_source, (long long)report.programs_from_binary);
  check(adreno_rt_close(model), "close");
  return 0;
}
