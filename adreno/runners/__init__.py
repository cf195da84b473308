"""How a measurement reaches a device: the Runner interface (`interface`: RunInput -> RunFuture -> RunResult,
failures as values) and its implementations, one module each: `local` (pyopencl here, in-process or isolated in a
child), `rpc` (the farm's device agents through TVM's tracker), `native` (a TVM library on a device running TVM's
own `tvm_rpc`). `offline` measures an exported batch on a machine with only numpy and pyopencl; `batch_dir` is
the batch directory's contract (manifest, replacing rule) that the exports, `offline` and the imports share.
`kernel_artifact` writes the one-kernel artifact a runner measures, for tuning's and orchestration's candidates alike
(so orchestration measures without importing tuning).

May import the artifact contract, the OpenCL executor, the program cache and the farm's RPC helpers; `interface`
and `offline` stay importable without TVM (TVM is imported inside the RPC and native runners' functions)."""
