"""User-facing errors: each one says what went wrong and what to do about it.

The CLI prints `AdrenoError`s as one clear message (no traceback) and exits with status 2; anything else
is a bug and surfaces with its traceback.
"""


class AdrenoError(Exception):
    """An error caused by the user's input or environment, with a message that says how to fix it."""


class UnknownTargetError(AdrenoError):
    """The target name is not in the device table."""


class ModelError(AdrenoError):
    """The model file is missing, malformed, or uses something the pipeline cannot handle."""


class UnsupportedOpError(ModelError):
    """An operator the pipeline cannot lower; the message names the op and the node."""


class DynamicShapeError(ModelError):
    """A model input has a dynamic dimension; the message names it and suggests --input-shape."""


class ArtifactError(AdrenoError):
    """An artifact directory is incomplete, corrupt, or from an incompatible version."""


class DeviceError(AdrenoError):
    """No usable OpenCL platform/device, or the requested one does not exist."""


class KernelBuildError(AdrenoError):
    """The OpenCL compiler rejected a kernel; the message carries the build log."""


class BuildOptionsError(AdrenoError):
    """The OpenCL compiler rejected the build options themselves (an unknown or malformed option), whatever the
    kernel: one line naming them and the driver's complaint, with no build log to read (there is none of a kernel)."""


# What TVM 0.27 raises when it refuses a function, a schedule step or a lowering: its errors are RuntimeError
# subclasses (InternalError, ScheduleError, ...) or ValueError/TypeError from argument checks.
TVM_ERRORS = (RuntimeError, ValueError, TypeError)


class OutputMismatchError(AdrenoError):
    """An artifact's outputs differ from onnxruntime's beyond the tolerance (`adreno.Artifact.check`); the message
    gives each output's error."""
