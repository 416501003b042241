/* A C program that runs a compiled model through the C API alone (it links only kiln_deploy):
 *   graph_c_program MODEL.kiln INPUT.raw OUTPUT.raw
 * reads input 0's bytes from INPUT.raw, runs the model and writes output 0's bytes to OUTPUT.raw.
 * It also checks that an input of the wrong shape is refused with a message naming the input and
 * that a file that is not a model does not load. Exit status 0 when everything held. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "deploy/graph_c_api.h"

static int fail(const char *what) {
  fprintf(stderr, "graph_c_program: %s: %s\n", what, kiln_graph_last_error());
  return 1;
}

int main(int argc, char **argv) {
  if (argc != 4) {
    fprintf(stderr, "usage: graph_c_program MODEL.kiln INPUT.raw OUTPUT.raw\n");
    return 2;
  }
  if (kiln_graph_load(argv[2]) != NULL || strstr(kiln_graph_last_error(), "not a Kiln model artifact") == NULL)
    return fail("a raw tensor file loaded as a model");
  KilnGraph *g = kiln_graph_load(argv[1]);
  if (!g) return fail("load");
  if (kiln_graph_num_inputs(g) < 1 || kiln_graph_num_outputs(g) < 1) return fail("no inputs or outputs");
  const char *name = kiln_graph_input_name(g, 0);
  int32_t ndim = kiln_graph_input_ndim(g, 0);
  const int64_t *shape = kiln_graph_input_shape(g, 0);
  uint8_t code = 0, bits = 0;
  if (kiln_graph_input_dtype(g, 0, &code, &bits) != 0) return fail("input dtype");
  size_t bytes = bits / 8;
  for (int32_t d = 0; d < ndim; ++d) bytes *= (size_t)shape[d];

  void *in = malloc(bytes);
  FILE *f = fopen(argv[2], "rb");
  if (!f || fread(in, 1, bytes, f) != bytes) return fail("read the input file");
  fclose(f);

  /* The wrong shape: the input's first extent plus one. */
  int64_t wrong[8];
  for (int32_t d = 0; d < ndim && d < 8; ++d) wrong[d] = shape[d];
  wrong[0] += 1;
  if (kiln_graph_set_input(g, 0, in, wrong, ndim, code, bits) == 0) return fail("a wrong shape was accepted");
  if (strstr(kiln_graph_last_error(), name) == NULL) return fail("the shape error does not name the input");

  if (kiln_graph_set_input(g, 0, in, shape, ndim, code, bits) != 0) return fail("set_input");
  if (kiln_graph_run(g) != 0) return fail("run");

  int32_t ondim = kiln_graph_output_ndim(g, 0);
  const int64_t *oshape = kiln_graph_output_shape(g, 0);
  uint8_t ocode = 0, obits = 0;
  if (kiln_graph_output_dtype(g, 0, &ocode, &obits) != 0) return fail("output dtype");
  size_t obytes = obits / 8;
  for (int32_t d = 0; d < ondim; ++d) obytes *= (size_t)oshape[d];
  const void *out = kiln_graph_output_data(g, 0);
  if (!out) return fail("output data");
  FILE *o = fopen(argv[3], "wb");
  if (!o || fwrite(out, 1, obytes, o) != obytes) return fail("write the output file");
  fclose(o);
  free(in);
  kiln_graph_free(g);
  return 0;
}
