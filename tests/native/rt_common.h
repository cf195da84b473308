/* What the C API's check programs (rt_check.c, rt_shapes.c) share: failing on a status, reading an input file,
 * opening an artifact with a blob file ("-" for none), and the blob states' names. */
#ifndef ADRENO_RT_TEST_COMMON_H_
#define ADRENO_RT_TEST_COMMON_H_

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "adreno_rt.h"

static const char* kBlobStates[] = {"not used", "absent", "loaded", "rejected", "refused by the driver"};

/* Exits 1 with the call's status message on stderr unless it succeeded. */
static inline void check(adreno_rt_status status, const char* what) {
  if (status.code != ADRENO_RT_OK) {
    fprintf(stderr, "%s: status %d: %s\n", what, (int)status.code, status.message);
    exit(1);
  }
}

/* `bytes` bytes of the file at `path` (malloc'd), or exit 1. */
static inline void* read_file(const char* path, size_t bytes) {
  void* data = malloc(bytes ? bytes : 1);
  FILE* f = fopen(path, "rb");
  if (!f || fread(data, 1, bytes, f) != bytes) {
    fprintf(stderr, "%s: cannot read %zu bytes\n", path, bytes);
    exit(1);
  }
  fclose(f);
  return data;
}

/* Opens `artifact` with the blob file `blob` ("-": none) and the other options' defaults, or exits 1. */
static inline adreno_rt_model* open_model(const char* artifact, const char* blob, adreno_rt_options* options) {
  adreno_rt_options_init(options);
  options->blob_path = strcmp(blob, "-") == 0 ? NULL : blob;
  adreno_rt_model* model = NULL;
  check(adreno_rt_open(artifact, options, &model), "open");
  return model;
}

/* The selected set's inputs, input i read from "<prefix>in<i>.bin" (calloc'd, one entry more than `count`), and
 * its outputs' memory (malloc'd, each of the output's size); exits 1 when a file cannot be read. */
static inline adreno_rt_view* read_inputs(adreno_rt_model* model, const char* prefix, size_t count) {
  char path[4096 + 64];  /* the prefix (of at most 4096 bytes) and the file's name */
  adreno_rt_view* inputs = calloc(count + 1, sizeof(adreno_rt_view));
  for (size_t i = 0; i < count; ++i) {
    adreno_rt_tensor_info info;
    check(adreno_rt_input_info(model, i, &info), "input_info");
    snprintf(path, sizeof(path), "%sin%zu.bin", prefix, i);
    inputs[i].data = read_file(path, info.bytes);
    inputs[i].bytes = info.bytes;
  }
  return inputs;
}

static inline void allocate_outputs(adreno_rt_model* model, adreno_rt_buffer* outputs, size_t count) {
  for (size_t i = 0; i < count; ++i) {
    adreno_rt_tensor_info info;
    check(adreno_rt_output_info(model, i, &info), "output_info");
    outputs[i].bytes = info.bytes;
    outputs[i].data = malloc(info.bytes ? info.bytes : 1);
  }
}

#endif /* ADRENO_RT_TEST_COMMON_H_ */
