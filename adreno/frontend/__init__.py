"""The model side of the compiler: an ONNX model (a file, a ModelProto or a zoo name) in, a Relax module out.

Owns everything done to the ONNX graph before TVM sees it: loading and checking (`importer`), inputs bound at
compile time (`bind`), shape folding (`constfold`, `canonical`), the forms TVM's importer reads wrongly or not at
all (`rewrites`, `decompose`, `old_opsets`, `recurrent`, `quantized`), a faster form of one it reads slowly
(`upsampling`), empty outputs (`empty`) and the bundled models built in code (`zoo`); `onnx_reading` tells them all
a model's opset and a node's attributes.

May import: onnx, numpy, TVM's Relax importer, and from this package's parent only the TVM-free leaves
(`errors`, `paths`, `identifiers`, `native_log`, `artifact` for the plan's tensor specs). Nothing here imports the
compiler, the schedules, the runtime or the tuner."""
