"""What TVM's C++ code writes to stderr during a compile: dropped where it is noise, else each line shown once.

TVM 0.27 logs its warnings from C++ straight to file descriptor 2, past Python's `warnings` and `logging`, so neither
can filter them; only redirecting the descriptor can. Three kinds reach a user today:
- a failed import's `BlockBuilder destroyed with remaining blocks!`, which would follow our one-line error as a
  second line: `quiet_stderr` drops everything the importer writes;
- legalization's `Fast mode segfaults when there are out-of-bounds indices. Make sure input indices are in bound`,
  once per Gather and pass (eight lines for a large detector): the ONNX importer emits every Gather as `take` in
  "fast" mode. It is noise for an ONNX model: the importer normalises negative indices, and an index out of range
  is refused at compile time when constant (`frontend.indices`) and clamped and reported at run time when computed
  (`frontend.index_guards`). `summarised_stderr` drops it and shows every other line once, with a
  count when TVM repeated it, so a warning we do not know about is still seen, in one line.
- the host build's `codegen_cpu.cc:...: Warning: Unknown pragma pragma_scope`, once per scatter: TVM's hand-written
  GPU scatter kernels (topi's ir_builder) mark their block `pragma_scope`, which only the device code means; the
  LLVM host code that launches them ignores it. `adreno.compiler.host_library` builds under `summarised_stderr`.
The same warning comes from any `FoldConstant` of a constant Gather (the unrolled LSTM's weights): the Winograd
workload scan `adreno tune` uses folds under `summarised_stderr` too (`adreno.compiler.winograd.eligible_workloads`).
An OpenCL driver's compiler writes there too: PoCL's clang counts its diagnostics (`1 error generated.`) beside the
build log; the program builds drop that count (`DRIVER_NOISE`)."""

from __future__ import annotations

import contextlib
import os
import re
import sys
import tempfile

# Messages of TVM's C++ log that say nothing about an ONNX model (see the module doc).
HARMLESS = ("Fast mode segfaults when there are out-of-bounds indices", "Unknown pragma pragma_scope")
# What an OpenCL driver's compiler writes to file descriptor 2 beside the build log (PoCL's clang: `1 error
# generated.`): a failed build is already one line with the whole log in a file (`adreno.opencl.programs`).
DRIVER_NOISE = (" error generated.", " errors generated.", " warning generated.", " warnings generated.")
_TIMESTAMP = re.compile(r"^\[\d\d:\d\d:\d\d\] ")  # glog's prefix, which differs between repeats of one warning


@contextlib.contextmanager
def _redirected_fd2(sink):
    """File descriptor 2 pointed at the open file `sink` for the block, then restored."""
    sys.stderr.flush()
    saved = os.dup(2)
    os.dup2(sink.fileno(), 2)
    try:
        yield
    finally:
        sys.stderr.flush()
        os.dup2(saved, 2)
        os.close(saved)


@contextlib.contextmanager
def quiet_stderr():
    """Silence file descriptor 2 for the block: what C++ writes there inside it is dropped."""
    with tempfile.TemporaryFile() as sink, _redirected_fd2(sink):
        yield


@contextlib.contextmanager
def summarised_stderr(harmless: tuple[str, ...] = HARMLESS):
    """Run the block with file descriptor 2 captured; afterwards (also when it raised) write each distinct line of
    it once, in order of first appearance, with `(N times)` when repeated, leaving out the lines that contain a
    `harmless` message."""
    with tempfile.TemporaryFile() as sink:
        try:
            with _redirected_fd2(sink):
                yield
        finally:
            sink.seek(0)
            counts: dict[str, int] = {}
            for line in sink.read().decode(errors="replace").splitlines():
                if line.strip() and not any(message in line for message in harmless):
                    message = _TIMESTAMP.sub("", line)
                    counts[message] = counts.get(message, 0) + 1
            if counts:
                os.write(2, "".join(f"{m}{f' ({n} times)' if n > 1 else ''}\n" for m, n in counts.items()).encode())
