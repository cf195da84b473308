/* The C API's check program (tests/native/test_rt_api.py compiles it against native/rt/adreno_rt.h):
 *
 *   rt_check ARTIFACT IO_DIR BLOB|- [THREADS]
 *
 * opens ARTIFACT (with the blob file BLOB, or none for "-"), reads input i from IO_DIR/in<i>.bin, runs it with
 * caller-owned outputs and writes output i to IO_DIR/out<i>.bin, runs it again with model-owned outputs and
 * checks they are the same bytes; with THREADS, that many threads run at once, alternately on the model and on a
 * second model of the same artifact opened beside it, each checking its outputs against the first run's. Prints one JSON line (the model's description and the start report); exit 0,
 * or 1 with the failing call's status message on stderr. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "rt_common.h"

static void print_ports(adreno_rt_model* model, int inputs) {
  size_t count = 0;
  check(inputs ? adreno_rt_input_count(model, &count) : adreno_rt_output_count(model, &count), "count");
  printf("\"%s\": [", inputs ? "inputs" : "outputs");
  for (size_t i = 0; i < count; ++i) {
    adreno_rt_tensor_info info;
    check(inputs ? adreno_rt_input_info(model, i, &info) : adreno_rt_output_info(model, i, &info), "info");
    printf("%s{\"name\": \"%s\", \"dtype\": \"%s\", \"dtype_code\": %d, \"bytes\": %zu, \"shape\": [", i ? ", " : "",
           info.name, info.dtype_name, (int)info.dtype, info.bytes);
    for (int32_t d = 0; d < info.ndim; ++d) printf("%s%lld", d ? ", " : "", (long long)info.shape[d]);
    printf("]}");
  }
  printf("], ");
}

struct Job {
  adreno_rt_model* model;
  const adreno_rt_view* inputs;
  size_t input_count, output_count;
  const adreno_rt_buffer* expected;
  int ok;
};

static void* run_and_compare(void* arg) {
  struct Job* job = (struct Job*)arg;
  adreno_rt_buffer mine[16];
  for (size_t i = 0; i < job->output_count; ++i) {
    mine[i].bytes = job->expected[i].bytes;
    mine[i].data = malloc(mine[i].bytes ? mine[i].bytes : 1);
  }
  adreno_rt_status status = adreno_rt_run(job->model, job->inputs, job->input_count, mine, job->output_count);
  job->ok = status.code == ADRENO_RT_OK;
  for (size_t i = 0; i < job->output_count; ++i) {
    job->ok = job->ok && memcmp(mine[i].data, job->expected[i].data, mine[i].bytes) == 0;
    free(mine[i].data);
  }
  return NULL;
}

int main(int argc, char** argv) {
  if (argc < 4) {
    fprintf(stderr, "usage: rt_check ARTIFACT IO_DIR BLOB|- [THREADS]\n");
    return 2;
  }
  adreno_rt_options options;
  adreno_rt_model* model = open_model(argv[1], argv[3], &options);

  size_t input_count = 0, output_count = 0;
  check(adreno_rt_input_count(model, &input_count), "input_count");
  check(adreno_rt_output_count(model, &output_count), "output_count");
  if (output_count > 16) return 1;
  char path[4096];
  snprintf(path, sizeof(path), "%s/", argv[2]);
  adreno_rt_view* inputs = read_inputs(model, path, input_count);
  adreno_rt_buffer outputs[16];
  allocate_outputs(model, outputs, output_count);
  check(adreno_rt_run(model, inputs, input_count, outputs, output_count), "run");
  const adreno_rt_view* owned = NULL;
  check(adreno_rt_run_owned(model, inputs, input_count, &owned), "run_owned");
  for (size_t i = 0; i < output_count; ++i) {
    if (owned[i].bytes != outputs[i].bytes || memcmp(owned[i].data, outputs[i].data, owned[i].bytes) != 0) {
      fprintf(stderr, "run_owned's output %zu differs from run's\n", i);
      return 1;
    }
    snprintf(path, sizeof(path), "%s/out%zu.bin", argv[2], i);
    FILE* f = fopen(path, "wb");
    if (!f || fwrite(outputs[i].data, 1, outputs[i].bytes, f) != outputs[i].bytes) return 1;
    fclose(f);
  }
  int threads = argc > 4 ? atoi(argv[4]) : 0;
  adreno_rt_model* second = NULL;
  if (threads > 1) check(adreno_rt_open(argv[1], &options, &second), "open a second model");
  struct Job jobs[8];
  pthread_t ids[8];
  for (int t = 0; t < threads && t < 8; ++t) {
    jobs[t] = (struct Job){t % 2 ? second : model, inputs, input_count, output_count, outputs, 0};
    pthread_create(&ids[t], NULL, run_and_compare, &jobs[t]);
  }
  for (int t = 0; t < threads && t < 8; ++t) {
    pthread_join(ids[t], NULL);
    if (!jobs[t].ok) {
      fprintf(stderr, "thread %d's run failed or differs\n", t);
      return 1;
    }
  }
  if (second != NULL) check(adreno_rt_close(second), "close the second model");

  adreno_rt_start_report report;
  check(adreno_rt_start_report_of(model, &report), "start_report");
  printf("{");
  print_ports(model, 1);
  print_ports(model, 0);
  printf("\"device\": \"%s\", \"blob\": \"%s\", \"rejected_because\": \"%s\", \"written\": %d, "
         "\"write_error\": \"%s\", \"from_source\": %lld, \"from_binary\": %lld, \"rejected\": %lld, "
         "\"first_run_ms\": %.3f}\n",
         report.device, kBlobStates[report.blob], report.blob_rejected_because, report.blob_written,
         report.blob_write_error, (long long)report.programs_from_source, (long long)report.programs_from_binary,
         (long long)report.programs_rejected, report.first_run_ms);
  check(adreno_rt_close(model), "close");
  for (size_t i = 0; i < input_count; ++i) free((void*)inputs[i].data);
  for (size_t i = 0; i < output_count; ++i) free(outputs[i].data);
  free(inputs);
  return 0;
}
