"""The `adreno` command: one module per command group (`listing`, `compile`, `run`, `tune`, `cache`, `farm`,
`orchestrate`), each with a `register(sub, command)` that adds its subcommands; `main` assembles them and turns an
`AdrenoError` into one line and exit status 2; `common` holds what the groups share (progress lines, --json output,
the check of numeric options).

May import everything below it (the compiler, the runtimes, the tuner, the farm); nothing imports this package,
so a command's heavy imports (TVM, onnx, pyopencl) stay inside the command's function."""
