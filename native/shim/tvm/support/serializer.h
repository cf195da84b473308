// Stand-in for TVM's <tvm/support/serializer.h> (not in the apache-tvm wheel; see io.h beside it). The typed
// helpers of the io.h stand-in cover every type tensor.h's inline code writes, so nothing is declared here.
#ifndef ADRENO_NATIVE_SHIM_TVM_SUPPORT_SERIALIZER_H_
#define ADRENO_NATIVE_SHIM_TVM_SUPPORT_SERIALIZER_H_
#include <tvm/support/io.h>
#endif  // ADRENO_NATIVE_SHIM_TVM_SUPPORT_SERIALIZER_H_
