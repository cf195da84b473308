"""Evicting the device's caches before a timed run, so a measured kernel finds its weights and inputs out of the
caches, as a kernel in a whole model finds its weights, instead of left there by the previous repeat.

An `Evictor` owns one OpenCL context and one scratch buffer in it (`eviction_bytes` of the device), filled before
each timed run. A runner that measures many artifacts builds them all in the evictor's context and keeps the one
buffer: a fresh buffer pays for its first touch on every measurement (on PoCL 64 MiB of page faults, about 35 ms,
as much as five fills; a candidate of `adreno compile --orchestrate` is measured in about 100 ms).
"""

from __future__ import annotations

from .device import eviction_bytes


class Evictor:
    """One context of one device and its scratch buffer (allocated at the first eviction)."""

    def __init__(self, context):
        self.context = context
        self.nbytes = eviction_bytes(context.devices[0])
        self._scratch = None

    @classmethod
    def for_device(cls, device) -> Evictor:
        import pyopencl as cl

        return cls(cl.Context([device]))

    def evict(self, queue, index: int) -> None:
        """Fill the scratch buffer (a value per `index`, so no fill is a no-op) and wait for it."""
        import numpy as np  # here, not at import: the farm's agent module loads neither numpy nor pyopencl
        import pyopencl as cl

        if self._scratch is None:
            self._scratch = cl.Buffer(self.context, cl.mem_flags.READ_WRITE, self.nbytes)
        cl.enqueue_fill_buffer(queue, self._scratch, np.uint32(index), 0, self.nbytes)
        queue.finish()
