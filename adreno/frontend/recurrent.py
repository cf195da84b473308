"""LSTM, GRU and RNN (ONNX semantics), which TVM 0.27's importer lacks, unrolled at the compiled sequence length.

A direction's input projection is one MatMul over every time step (X as (T * batch) x input times W^T, plus the
W bias); each step then adds its row of it to the recurrent MatMul (H_{t-1} R^T plus the R bias), slices the gates
and does the gate arithmetic elementwise, so every step is a MatMul and fused elementwise kernels. A zero initial
state (no initial_h / initial_c) skips the first step's recurrent MatMul. Weights stay ONNX ops (Gather a
direction, Transpose, Slice): with the model's weights as constants they fold at compile time; as graph inputs
(ONNX's node cases) they run.

- LSTM (gates i, o, f, c): C = f * C_{t-1} + i * g(c), H = o * h(C); peepholes P (i, o, f) add P * C_{t-1} to
  i and f and P * C to o; `input_forget` makes f = 1 - i. GRU (gates z, r, h): H = (1 - z) * h~ + z * H_{t-1},
  with `linear_before_reset` 0 (h~ = g(X Wh + (r * H_{t-1}) Rh + Rbh + Wbh)) or 1 (h~ = g(X Wh + r * (H_{t-1} Rh
  + Rbh) + Wbh)). RNN: H = f(X W + H_{t-1} R + Wb + Rb).
- Directions forward, reverse (steps from the last time to the first) and bidirectional; `layout` 0 and 1;
  outputs Y, Y_h, Y_c, any of them; `clip` bounds every activation's input to [-clip, clip].
- Refused in one line naming the node: an input X without a static 3-D shape, `sequence_lens` that is not a
  constant equal to the sequence length everywhere (a shorter sequence would need masking per batch row),
  activations other than Sigmoid, Tanh, Relu, Softsign and Softplus, and `activation_alpha` / `activation_beta`.
"""

from __future__ import annotations

import numpy as np

from ..errors import UnsupportedOpError
from .onnx_reading import attributes

RECURRENT_OPS = ("LSTM", "GRU", "RNN")
GATES = {"LSTM": 4, "GRU": 3, "RNN": 1}
DEFAULT_ACTIVATIONS = {"LSTM": ["Sigmoid", "Tanh", "Tanh"], "GRU": ["Sigmoid", "Tanh"], "RNN": ["Tanh"]}
ACTIVATIONS = {name.lower(): name for name in ("Sigmoid", "Tanh", "Relu", "Softsign", "Softplus")}  # no parameters
DIRECTIONS = {"forward": 1, "reverse": 1, "bidirectional": 2}
CONCAT_INPUTS = 16  # a Concat of the steps is a tree of Concats this wide: a kernel's arguments stay few


def unroll(b, node, shapes: dict, label: str) -> None:
    """Append to builder `b` the nodes computing recurrent `node`'s outputs; `shapes` are the graph's static shapes."""
    attrs = attributes(node)
    op = node.op_type
    for unsupported in ("activation_alpha", "activation_beta"):
        if unsupported in attrs:
            raise UnsupportedOpError(f"{label}: attribute {unsupported} is not supported; use activations without "
                                     "parameters (Sigmoid, Tanh, Relu, Softsign, Softplus)")
    names = [a.decode() if isinstance(a, bytes) else a for a in attrs.get("activations", [])]
    direction = attrs.get("direction", b"forward")
    direction = direction.decode() if isinstance(direction, bytes) else direction
    count = DIRECTIONS.get(direction)
    if count is None:
        raise UnsupportedOpError(f"{label}: attribute direction={direction!r} is not forward, reverse or "
                                 "bidirectional")
    per_direction = len(DEFAULT_ACTIVATIONS[op])
    names = names or DEFAULT_ACTIVATIONS[op] * count
    unknown = [n for n in names if n.lower() not in ACTIVATIONS]
    if unknown or len(names) != per_direction * count:
        raise UnsupportedOpError(f"{label}: attribute activations={names} is not supported; give "
                                 f"{per_direction * count} of Sigmoid, Tanh, Relu, Softsign, Softplus")
    inputs = [*node.input, *[""] * (8 - len(node.input))]
    x, w, r, bias, lengths, initial_h, initial_c, peepholes = inputs[:8]
    x_shape, w_shape = shapes.get(x), shapes.get(w)
    if x_shape is None or len(x_shape) != 3 or w_shape is None:
        raise UnsupportedOpError(f"{label}: it is unrolled for an input X and weights W of static shape only; give "
                                 "the input's shape with --input-shape")
    layout = attrs.get("layout", 0)
    steps, batch = (x_shape[1], x_shape[0]) if layout else (x_shape[0], x_shape[1])
    hidden = int(attrs.get("hidden_size", w_shape[1] // GATES[op]))
    _check_lengths(b.model, lengths, steps, label)
    if layout:  # batch-major: unrolled time-major, the outputs transposed back
        x = b.op("Transpose", [x], perm=[1, 0, 2])
        initial_h, initial_c = (b.op("Transpose", [s], perm=[1, 0, 2]) if s else "" for s in (initial_h, initial_c))
    cell = _Cell(b, op, hidden, attrs)
    flat = b.reshape(x, [steps * batch, x_shape[2]])
    finals_h, finals_c, sequences = [], [], []
    for d in range(count):
        reverse = direction == "reverse" or d == 1
        pick = lambda value: b.op("Gather", [value, b.constant(np.int64(d))], axis=0)  # noqa: E731
        w_bias = r_bias = None
        if bias:
            bias_d = pick(bias)
            w_bias, r_bias = (b.slice(bias_d, k * GATES[op] * hidden, (k + 1) * GATES[op] * hidden, 0)
                              for k in range(2))
        projection = b.op("MatMul", [flat, b.op("Transpose", [pick(w)], perm=[1, 0])])
        if w_bias:
            projection = b.op("Add", [projection, w_bias])

        h = pick(initial_h) if initial_h else None
        c = pick(initial_c) if initial_c else None
        cell.direction(pick(r), r_bias, pick(peepholes) if peepholes else None,
                       [ACTIVATIONS[n.lower()] for n in names[d * per_direction:(d + 1) * per_direction]])
        outputs = [None] * steps
        for t in (reversed(range(steps)) if reverse else range(steps)):
            h, c = cell.step(b.slice(projection, t * batch, (t + 1) * batch, 0), h, c)  # rows of step t
            outputs[t] = h
        finals_h.append(b.reshape(h, [1, batch, hidden]))
        finals_c.append(b.reshape(c, [1, batch, hidden]) if c is not None else None)
        sequences.append(b.reshape(_concat(b, outputs, 0), [steps, 1, batch, hidden]))  # (T * batch) x hidden
    wanted = [*node.output, "", ""][:3]
    if wanted[0]:
        _output(b, _concat(b, sequences, 1), [2, 0, 1, 3] if layout else None, wanted[0])
    if wanted[1]:
        _output(b, _concat(b, finals_h, 0), [1, 0, 2] if layout else None, wanted[1])
    if op == "LSTM" and wanted[2]:
        _output(b, _concat(b, finals_c, 0), [1, 0, 2] if layout else None, wanted[2])


def _check_lengths(model, lengths: str, steps: int, label: str) -> None:
    """`sequence_lens` may only say what unrolling assumes: every sequence has all `steps` steps."""
    if not lengths:
        return
    from onnx import numpy_helper

    value = next((numpy_helper.to_array(t) for t in model.graph.initializer if t.name == lengths), None)
    for node in model.graph.node:
        if node.op_type == "Constant" and list(node.output) == [lengths]:
            value = next(numpy_helper.to_array(a.t) for a in node.attribute if a.name == "value")
    if value is None or not np.all(np.asarray(value) == steps):
        found = "not a constant" if value is None else f"{np.asarray(value).tolist()}"
        raise UnsupportedOpError(f"{label}: sequence_lens ({found}) must be a constant equal to the sequence length "
                                 f"{steps} for every batch row (unrolled at that length); pad the sequences instead")


def _concat(b, values: list[str], axis: int) -> str:
    if len(values) == 1:
        return values[0]
    while len(values) > CONCAT_INPUTS:
        values = [_concat(b, values[i:i + CONCAT_INPUTS], axis) for i in range(0, len(values), CONCAT_INPUTS)]
    return b.op("Concat", values, axis=axis)


def _output(b, value: str, perm: list[int] | None, name: str) -> None:
    if perm:
        b.op("Transpose", [value], name, perm=perm)
    else:
        b.op("Identity", [value], name)


class _Cell:
    """One direction's step of an LSTM, GRU or RNN: gate arithmetic on ONNX ops appended to the builder. Gates are
    column slices of batch x (gates * hidden) tensors, which fuse with the arithmetic into one kernel a step."""

    def __init__(self, b, op: str, hidden: int, attrs: dict):
        self.b, self.op, self.hidden = b, op, hidden
        self.clip = attrs.get("clip")
        self.input_forget = bool(attrs.get("input_forget", 0))
        self.before_reset = bool(attrs.get("linear_before_reset", 0))

    def direction(self, r: str, r_bias: str | None, peepholes: str | None, activations: list[str]) -> None:
        """The next direction's recurrence weights R^T (of the gates the step multiplies by H_{t-1}), its R bias
        (gates x hidden) and peepholes (3 x hidden)."""
        b, hidden, gates = self.b, self.hidden, GATES[self.op]
        self.activations = activations
        self.peepholes = b.reshape(peepholes, [1, 3 * hidden]) if peepholes else None
        self.r_bias = b.reshape(r_bias, [1, gates * hidden]) if r_bias else None
        self.rh_bias = None
        if self.op == "GRU" and not self.before_reset:  # r * H_{t-1} is multiplied by Rh on its own
            self.r_t = b.op("Transpose", [b.slice(r, 0, 2 * hidden, 0)], perm=[1, 0])
            self.rh_t = b.op("Transpose", [b.slice(r, 2 * hidden, 3 * hidden, 0)], perm=[1, 0])
            if self.r_bias:
                self.rh_bias = self.gate(self.r_bias, 2)
                self.r_bias = b.slice(self.r_bias, 0, 2 * hidden, 1)
        else:
            self.r_t = b.op("Transpose", [r], perm=[1, 0])

    def gate(self, value: str, k: int) -> str:
        return self.b.slice(value, k * self.hidden, (k + 1) * self.hidden, 1)

    def step(self, x_gates: str, h: str | None, c: str | None) -> tuple[str, str | None]:
        """H_t (and C_t) from this step's input projection (batch x (gates * hidden)) and the previous state (None:
        zero)."""
        b = self.b
        recurrent = b.op("MatMul", [h, self.r_t]) if h is not None else None
        if recurrent and self.r_bias:
            recurrent = b.op("Add", [recurrent, self.r_bias])
        recurrent = recurrent or self.r_bias
        gate = lambda k: self.gate(x_gates, k)  # noqa: E731
        state = lambda k: self.gate(recurrent, k) if recurrent else None  # noqa: E731
        total = lambda k: b.op("Add", [gate(k), state(k)]) if recurrent else gate(k)  # noqa: E731
        if self.op == "RNN":
            return self.act(0, total(0)), None
        if self.op == "GRU":
            return self._gru(h, gate, state, total), None
        return self._lstm(c, total)

    def act(self, index: int, value: str) -> str:
        if self.clip is not None:
            value = self.b.clip(value, -float(self.clip), float(self.clip))
        return self.b.op(self.activations[index], [value])

    def _peephole(self, value: str, k: int, cell: str | None) -> str:
        if self.peepholes is None or cell is None:
            return value
        return self.b.op("Add", [value, self.b.op("Mul", [self.gate(self.peepholes, k), cell])])

    def _lstm(self, c: str | None, total) -> tuple[str, str]:
        b = self.b
        i = self.act(0, self._peephole(total(0), 0, c))
        if self.input_forget:
            f = b.op("Sub", [b.constant(np.float32(1)), i])
        else:
            f = self.act(0, self._peephole(total(2), 2, c))
        cell = b.op("Mul", [i, self.act(1, total(3))])
        if c is not None:
            cell = b.op("Add", [cell, b.op("Mul", [f, c])])
        o = self.act(0, self._peephole(total(1), 1, cell))
        return b.op("Mul", [o, self.b.op(self.activations[2], [cell])]), cell

    def _gru(self, h: str | None, gate, state, total) -> str:
        b = self.b
        z, reset = self.act(0, total(0)), self.act(0, total(1))
        candidate = gate(2)
        if self.before_reset:
            hidden_state = state(2)
            if hidden_state:
                candidate = b.op("Add", [candidate, b.op("Mul", [reset, hidden_state])])
        else:
            if h is not None:
                candidate = b.op("Add", [candidate, b.op("MatMul", [b.op("Mul", [reset, h]), self.rh_t])])
            if self.rh_bias:
                candidate = b.op("Add", [candidate, self.rh_bias])
        candidate = self.act(1, candidate)
        if h is None:  # (1 - z) * h~
            return b.op("Sub", [candidate, b.op("Mul", [z, candidate])])
        return b.op("Add", [candidate, b.op("Mul", [z, b.op("Sub", [h, candidate])])])
