"""What the artifact's weight file stores for each param of the plan, and how a loader turns it into the param.

A param of the launch plan is the tensor a kernel reads. What `params.npz` stores under the param's name is the
smallest thing it can be rebuilt from (`TensorSpec.stored`, a `StoredWeight`; None: the param itself):

- a Winograd weight (`WeightTransform.WINOGRAD_F2`/`F4`) is stored as the model's own 3x3 weight g (O, C, 3, 3)
  and transformed at load, U = G g G^T ((alpha, alpha, O, C); packed for texture stages as
  `adreno.artifact.winograd_weights.transform_weight` lays it out), instead of 4x (F4) or 1.8x (F2) as many
  transformed values;
- a weight of an fp16 artifact is stored as float16: the values a half-float image's pixels hold, or, for a weight
  a kernel reads from a float32 buffer, rounded to half and widened at load (unless a value is beyond half's
  range: then it stays float32);
- a weight of a quantized model (`adreno.frontend.quantized.QuantizedWeight`) is stored as its int8 / uint8 tensor q
  with its scales and zero points (`Quantization`, per tensor or along one axis) and dequantized at load,
  `float32(int32(q) - int32(zero_point)) * scale` in float32 (one exactly rounded multiply: every loader gets the
  same values), before its transform when it has one (a quantized 3x3 weight that the Winograd rewrite
  transformed is stored as its integer g) or its packing (`packed` with no transform: a conv weight the texture
  planner packed to OIHW4o is stored as its integer (O, I, KH, KW) tensor and packed by `pack_oihw4o` at load; a
  Gemm or MatMul weight that Relax folded into its transpose is stored as its integer tensor and transposed at load,
  `WeightTransform.TRANSPOSE`);
- the 8-bit weight of an integer op (MatMulInteger, which TVM's importer computes in int32 and whose weight Relax
  folds into the int32 constant `int32(q) - zero_point`) is stored as q with its zero point and a scale of 1, and
  widened at load (`Quantization.widen`), exactly: the int32 param and the kernels are the same as without it, at a
  quarter of the bytes.

Every loader (the launch-plan executor, TVM's runtime path, the C++ harness `native/harness/weight_forms.cc`)
calls the same recipe (`adreno.artifact.winograd_weights.transform_weight`: an explicit order of float64 operations,
so that C++ compiled with `-ffp-contract=off` computes the same float32 values bit for bit).

Compile-side: the Winograd rewrite registers each transformed weight it emits with a `WinogradWeights` collector,
and `extract_plan` asks it which constants of the lowered module are such weights (by content: Relax passes may
copy constants, a digest of the bytes survives them).
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from enum import Enum

import numpy as np

from ..errors import ArtifactError
from ..targets.layout import LANES, channels4, pack_oihw4o

INTEGER_PARAM = "int32"  # the dtype of an integer op's weight (MatMulInteger's), rebuilt by widening its 8-bit member


class WeightTransform(str, Enum):
    """How a stored weight becomes its param."""

    NONE = "none"  # stored as the param is (perhaps in a narrower dtype: float16 for half images)
    WINOGRAD_F2 = "winograd2"  # U = G g G^T of F(2x2, 3x3), alpha = 4
    WINOGRAD_F4 = "winograd4"  # F(4x4, 3x3), alpha = 6
    TRANSPOSE = "transpose"  # a 2-D weight stored as the model has it, transposed at load (Relax's Dense layout)

    @property
    def tile(self) -> int:
        return {WeightTransform.WINOGRAD_F2: 2, WeightTransform.WINOGRAD_F4: 4}[self]

    @classmethod
    def winograd(cls, tile: int) -> "WeightTransform":
        return {2: cls.WINOGRAD_F2, 4: cls.WINOGRAD_F4}[tile]


@dataclass(frozen=True)
class Quantization:
    """How an integer member becomes float32: `(q - zero_point) * scale`, per tensor (`axis` None: one of each) or
    along `axis` of the member (one scale and zero point per index of that axis)."""

    scale: tuple[float, ...]
    zero_point: tuple[int, ...]
    axis: int | None

    def to_json(self) -> dict:
        return {"scale": list(self.scale), "zero_point": list(self.zero_point), "axis": self.axis}

    @classmethod
    def from_json(cls, data: dict) -> "Quantization":
        axis = data["axis"]
        return cls(tuple(float(x) for x in data["scale"]), tuple(int(x) for x in data["zero_point"]),
                   None if axis is None else int(axis))

    def dequantize(self, q: np.ndarray) -> np.ndarray:
        """float32(int32(q) - int32(zero_point)) * float32(scale): the fixed order every loader follows."""
        scale = np.asarray(self.scale, np.float32).reshape(self._along(q.ndim))
        return (self.widen(q).astype(np.float32) * scale).astype(np.float32)

    def widen(self, q: np.ndarray) -> np.ndarray:
        """int32(q) - int32(zero_point), exact: the weight an integer op (MatMulInteger) reads, whose scale is 1."""
        return q.astype(np.int32) - np.asarray(self.zero_point, np.int32).reshape(self._along(q.ndim))

    def rebuild(self, q: np.ndarray, dtype: str) -> np.ndarray:
        """The param's values from q: widened for an int32 param (`StoredWeight.gives`), else dequantized."""
        return self.widen(q) if dtype == INTEGER_PARAM else self.dequantize(q)

    @property
    def unit_scale(self) -> bool:
        return all(s == 1.0 for s in self.scale)

    def _along(self, ndim: int) -> list[int]:
        """The shape a scale or zero point takes to broadcast against a member of rank `ndim`."""
        shape = [1] * ndim
        if self.axis is not None:
            shape[self.axis] = -1
        return shape

    def fits(self, shape) -> bool:
        """One scale and zero point per tensor, or per index of `axis` of a member of `shape`."""
        count = 1 if self.axis is None else (shape[self.axis] if 0 <= self.axis < len(shape) else -1)
        return len(self.scale) == len(self.zero_point) == count


@dataclass(frozen=True)
class StoredWeight:
    """A param's member of params.npz when it is not the param itself (`TensorSpec.stored`, as a dict in plan.json).
    packed: the transformed weight is laid out for packed (NCHW4c) Winograd stages; quantization: the member is
    an integer tensor, dequantized before the transform."""

    shape: tuple[int, ...]
    dtype: str
    transform: WeightTransform = WeightTransform.NONE
    packed: bool = False
    quantization: Quantization | None = None

    def to_json(self) -> dict:
        data = {"shape": list(self.shape), "dtype": self.dtype, "transform": self.transform.value,
                "packed": self.packed}
        if self.quantization is not None:
            data["quantization"] = self.quantization.to_json()
        return data

    @classmethod
    def from_json(cls, data: dict) -> "StoredWeight":
        quantization = data.get("quantization")
        return cls(tuple(int(d) for d in data["shape"]), str(data["dtype"]), WeightTransform(data["transform"]),
                   bool(data["packed"]), None if quantization is None else Quantization.from_json(quantization))

    def yields(self, shape) -> bool:
        """Whether this stored form gives a param of `shape`, the rule the artifact check applies before any load:
        as stored (or its OIHW4o packing), the 2-D transpose, or a Winograd (alpha, alpha, ...) param of an
        (O, C, 3, 3) source."""
        shape, stored = [int(d) for d in shape], list(self.shape)
        if self.transform is WeightTransform.NONE:
            return shape in (packed_shapes(stored) if self.packed else [stored])
        if self.transform is WeightTransform.TRANSPOSE:
            return len(stored) == 2 and shape == stored[::-1]
        alpha = self.transform.tile + 2
        return len(stored) == 4 and stored[2:] == [3, 3] and shape[:2] == [alpha, alpha]

    def gives(self, dtype: str) -> bool:
        """Whether this stored form can give a param of `dtype`: the param itself; every form a float32 one; an int32
        one also as an integer member of scale 1, widened (`Quantization.widen`), as it is or transposed: a float
        transform of an integer op's weight would change what the op computes."""
        if dtype == "float32" or self == StoredWeight(self.shape, dtype):
            return True
        return dtype == INTEGER_PARAM and self.quantization is not None and self.quantization.unit_scale and \
            not self.packed and self.transform in (WeightTransform.NONE, WeightTransform.TRANSPOSE)

    @property
    def nbytes(self) -> int:
        return int(np.prod(self.shape, dtype=np.int64)) * np.dtype(self.dtype).itemsize


def param_value(name: str, shape: list[int], dtype: str, stored: StoredWeight | None, array: np.ndarray) -> np.ndarray:
    """The param `name` (of `shape` and `dtype`) from what params.npz holds for it."""
    if stored is None:
        stored = StoredWeight(tuple(shape), dtype)
    elif not stored.gives(dtype):  # the artifact check refuses it first; a plan built by hand meets it here
        raise ArtifactError(f"param {name} ({dtype}): its stored form ({stored.dtype}) does not give its dtype; "
                            "recompile the model")
    if list(array.shape) != list(stored.shape) or str(array.dtype) != stored.dtype:
        raise ArtifactError(f"params.npz holds {name} as {list(array.shape)} {array.dtype}, the plan stores it as "
                            f"{list(stored.shape)} {stored.dtype}; recompile the model")
    if stored.quantization is not None:
        array = stored.quantization.rebuild(array, dtype)
    if stored.transform is WeightTransform.NONE:
        value = _pack_into(array, shape) if stored.packed else array
    elif stored.transform is WeightTransform.TRANSPOSE:
        value = np.ascontiguousarray(array.T) if array.ndim == 2 else array  # the caller's shape check refuses it
    else:
        from .winograd_weights import transform_weight  # inside: adreno --help does not need it

        value = transform_weight(array, stored.transform.tile, stored.packed)
    if list(value.shape) != list(shape):
        raise ArtifactError(f"param {name}: its stored form gives {list(value.shape)}, the plan says {shape}; "
                            "recompile the model")
    return value.astype(dtype, copy=False)


def packed_shapes(shape) -> list[list[int]]:
    """The shapes `pack_oihw4o` (the texture planner's OIHW4o) gives an (O, I, KH, KW) weight: I padded to a
    multiple of 4, and I kept (its depthwise form); none for another rank."""
    if len(shape) != 4:
        return []
    o, i, kh, kw = (int(d) for d in shape)
    return [[channels4(o), width, kh, kw, LANES] for width in dict.fromkeys((channels4(i) * LANES, i))]


def _pack_into(w: np.ndarray, shape: list[int]) -> np.ndarray:
    """The (O, I, KH, KW) weight `w` packed to OIHW4o as the texture planner packs it: its depthwise form (I kept)
    when the param's second dimension is I, else I padded to a multiple of 4."""
    if list(shape) not in packed_shapes(w.shape):
        return w  # the caller's shape check refuses it
    return pack_oihw4o(w, depthwise=shape[1] == w.shape[1])


def stored_form(array: np.ndarray, fp16: bool, half_pixels: bool, source: tuple | None,
                quantized: "QuantizedWeights | None" = None) -> tuple[StoredWeight | None, np.ndarray]:
    """(the StoredWeight, the array params.npz stores) of a param of value `array`: its Winograd source when it has
    one (`WinogradWeights.source_of`); the integer tensor of that source or of the param when `quantized` knows it
    as a dequantized weight; else in float16 in an fp16 artifact (`fp16`) when it feeds half-float images
    (which hold halves anyway) or when no value of it is beyond half's range (a buffer weight, widened at load);
    (None, array) for a param stored as it is."""
    stored = array if source is None else source[0]
    integer = quantized.source_of(stored) if quantized else None
    if integer is not None:
        q, quantization, packed, own = integer
        transform, packed = (own, packed) if source is None else source[1:]
        return StoredWeight(tuple(q.shape), str(q.dtype), transform, packed, quantization), q
    narrow = fp16 and stored.dtype == np.float32 and (half_pixels or _fits_half(stored))
    with np.errstate(over="ignore"):  # only into a half image, whose pixels hold the same infinities
        if source is not None:
            g, transform, packed = source
            g = g.astype(np.float16) if narrow else g
            return StoredWeight(tuple(g.shape), str(g.dtype), transform, packed), g
        if narrow:
            return StoredWeight(tuple(array.shape), "float16"), array.astype(np.float16)
    return None, array


def _fits_half(array: np.ndarray) -> bool:
    """No finite value becomes infinite in float16 (|x| <= 65504: e.g. no -1e9 mask, no "no limit" clip bound)."""
    finite = array[np.isfinite(array)]
    return not finite.size or float(np.abs(finite).max()) <= float(np.finfo(np.float16).max)


class WinogradWeights:
    """The Winograd-transformed weights one compile emitted: which constants of the lowered module can be stored as
    their 3x3 source instead (see the module doc)."""

    def __init__(self):
        self._by_digest: dict[tuple, tuple[np.ndarray, WeightTransform, bool]] = {}

    def record(self, transformed: np.ndarray, g: np.ndarray, tile: int, packed: bool) -> None:
        self._by_digest[content_digest(transformed)] = (g, WeightTransform.winograd(tile), packed)

    def source_of(self, array: np.ndarray) -> tuple[np.ndarray, WeightTransform, bool] | None:
        """(g, transform, packed) when `array` is a weight this compile transformed, else None."""
        if not self._by_digest or not any(key[0] == array.shape for key in self._by_digest):
            return None
        return self._by_digest.get(content_digest(array))


class QuantizedWeights:
    """The dequantized weights of a quantized model (`adreno.frontend.quantized.QuantizedWeight`), by the content of
    their float32 values: which constants of the lowered module can be stored as their integer tensor. A constant
    that Relax changed (a transpose, a fold with another constant) no longer matches and is stored as it is."""

    def __init__(self):
        self._by_digest: dict[tuple, tuple[np.ndarray, Quantization, bool, WeightTransform]] = {}
        self._recorded: dict[tuple, int] = {}  # digest of each form -> which recorded weight it is
        self._weights = 0  # recorded weights
        self._found: set[int] = set()  # the recorded weights a param was matched to

    def record(self, values: np.ndarray, scale: np.ndarray, zero_point: np.ndarray, axis: int | None,
               integer: bool = False) -> None:
        """The integer tensor `values` with its scale and zero point (per tensor, or along `axis`), known by its
        dequantized float32 value, or, `integer` (a weight an integer op reads, scale 1), by its int32 value
        `int32(q) - zero_point` (`Quantization.widen`). A convolution weight (O, I, KH, KW) is also known by the
        forms the texture planner packs it to (`pack_oihw4o`, OIHW4o, and its depthwise form when I is 1): its
        packed constant is stored as q too, and packed at load. A 2-D weight is also known by its transpose, the
        constant Relax folds a Gemm's or a Dense's weight into."""
        if values.dtype not in (np.int8, np.uint8):
            return  # an int32 bias: as large as its float32 form
        quantization = Quantization(tuple(float(x) for x in np.asarray(scale, np.float32).reshape(-1)),
                                    tuple(int(x) for x in np.asarray(zero_point).reshape(-1)), axis)
        if integer and not quantization.unit_scale:
            return  # no integer op reads a scaled weight: nothing folds to this value
        value = quantization.widen(values) if integer else quantization.dequantize(values)
        if content_digest(value) in self._recorded:
            return  # the same weight again (a model may list one tensor twice): one weight to find
        forms = {content_digest(value): (values, quantization, False, WeightTransform.NONE)}
        if value.ndim == 4 and not integer:
            for depthwise in (False, True) if value.shape[1] == 1 else (False,):
                forms[content_digest(pack_oihw4o(value, depthwise))] = (values, quantization, True,
                                                                        WeightTransform.NONE)
        if value.ndim == 2:
            forms[content_digest(np.ascontiguousarray(value.T))] = (values, quantization, False,
                                                                    WeightTransform.TRANSPOSE)
        self._by_digest.update(forms)
        self._recorded.update(dict.fromkeys(forms, self._weights))
        self._weights += 1

    def source_of(self, array: np.ndarray) -> tuple[np.ndarray, Quantization, bool, WeightTransform] | None:
        """(q, quantization, packed, transform) when `array` is a recorded weight's dequantized (or, int32, widened)
        value (packed: in OIHW4o; transform TRANSPOSE: its transpose), else None."""
        if array.dtype not in (np.float32, np.dtype(INTEGER_PARAM)) or \
                not any(key[0] == array.shape for key in self._by_digest):
            return None
        digest = content_digest(array)
        if digest in self._recorded:
            self._found.add(self._recorded[digest])
        return self._by_digest.get(digest)

    def stored_wide(self) -> int:
        """How many recorded weights no param was matched to: Relax changed them past recognition (folded them with
        another constant, or laid them out in a form not recorded here), so they are stored as the float32 (or
        int32) values the kernels read. The outputs are right; the weight file is up to 4x larger than it could be.
        The manifest's `weight_storage.quantized_stored_wide` and the compile's summary say it."""
        return self._weights - len(self._found)


def content_digest(array: np.ndarray) -> tuple:
    """The identity of a constant's value (its shape, dtype and bytes), which survives Relax's copies of it: the key
    by which the Winograd and quantized collectors know their weights and `extract_plan` stores equal constants as
    one param."""
    return array.shape, str(array.dtype), hashlib.blake2b(np.ascontiguousarray(array).data, digest_size=16).digest()
