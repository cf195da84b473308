#include "weight_forms.h"

#include <algorithm>
#include <cstring>
#include <stdexcept>

#include "checked.h"
#include "half.h"
#include "parallel.h"

namespace adreno_harness {

namespace {

constexpr int64_t kLanes = 4;  // channels of a packed tensor's pixel (adreno/targets/layout.py LANES)

// G of F(m x m, 3 x 3), as adreno/artifact/winograd_weights.py's _MATRICES (each entry the same float64 division).
std::vector<double> WinogradG(int tile) {
  if (tile == 2) return {1, 0, 0, 1.0 / 2, 1.0 / 2, 1.0 / 2, 1.0 / 2, -1.0 / 2, 1.0 / 2, 0, 0, 1};
  return {1.0 / 4,  0,        0,       -1.0 / 6, -1.0 / 6, -1.0 / 6, -1.0 / 6, 1.0 / 6, -1.0 / 6,
          1.0 / 24, 1.0 / 12, 1.0 / 6, 1.0 / 24, -1.0 / 12, 1.0 / 6, 0,        0,       1};
}

std::string ShapeText(const std::vector<int64_t>& shape) {
  std::string text = "[";
  for (size_t i = 0; i < shape.size(); ++i) text += (i ? ", " : "") + std::to_string(shape[i]);
  return text + "]";
}


// The member's values as float32: a float16 one widened (exact), an int8 / uint8 one dequantized in
// adreno.artifact.weights.Quantization's order (one float32 multiply; -ffp-contract=off keeps it one).
Floats SourceValues(const std::string& name, const NpyView& stored, const StoredForm& form) {
  // ParseNpy refused negative and overflowing extents and checked the bytes against them; checked again for a
  // view made elsewhere
  const size_t count = static_cast<size_t>(CheckedElements(stored.shape, "param " + name + " stored"));
  if (count * DtypeBytes(stored.dtype) != stored.size) {
    throw std::runtime_error("param " + name + ": " + std::to_string(stored.size) + " stored bytes for its shape " +
                             ShapeText(stored.shape));
  }
  Floats values(count);  // every branch writes every element
  const bool integer = stored.dtype == "int8" || stored.dtype == "uint8";
  if (integer != form.quantized) {
    throw std::runtime_error("param " + name + " is stored as " + stored.dtype +
                             (form.quantized ? " with scales" : " without scales") + "; recompile the model");
  }
  if (integer) {
    int64_t inner = 1, extent = 1;
    if (form.axis < -1 || form.axis >= static_cast<int64_t>(stored.shape.size())) {
      throw std::runtime_error("param " + name + ": quantization axis " + std::to_string(form.axis) + " is not one of "
                               "its stored shape " + ShapeText(stored.shape));
    }
    if (form.axis >= 0) {
      extent = stored.shape[static_cast<size_t>(form.axis)];
      for (size_t d = static_cast<size_t>(form.axis) + 1; d < stored.shape.size(); ++d) inner *= stored.shape[d];
    }
    if (form.scale.size() != static_cast<size_t>(extent) || form.zero_point.size() != form.scale.size()) {
      throw std::runtime_error("param " + name + ": its scales do not fit its stored shape " + ShapeText(stored.shape));
    }
    for (size_t i = 0; i < count; ++i) {  // count > 0: inner and extent are too
      const size_t k = static_cast<size_t>((static_cast<int64_t>(i) / inner) % extent);
      const int32_t q = stored.dtype == "int8" ? static_cast<int32_t>(reinterpret_cast<const int8_t*>(stored.data)[i])
                                               : static_cast<int32_t>(reinterpret_cast<const uint8_t*>(stored.data)[i]);
      values[i] = static_cast<float>(q - form.zero_point[k]) * form.scale[k];
    }
  } else if (stored.dtype == "float16") {
    for (size_t i = 0; i < count; ++i) {
      uint16_t half;
      std::memcpy(&half, stored.data + 2 * i, 2);
      values[i] = HalfToFloat(half);
    }
  } else if (count > 0) {  // a zero-size member may have no bytes at all: no memcpy from null
    std::memcpy(values.data(), stored.data, 4 * count);
  }
  return values;
}

// U[a][b][o][c] = sum_r G[a][r] t[o][c][r][b], t[o][c][r][b] = sum_s g[o][c][r][s] G[b][s], sums left to right,
// written at U's index (alpha, alpha, O, C), or at the packed one (alpha, alpha, ceil(O/4), 4 ceil(C/4), 4).
// Rows of output channels (four at a time when packed: one packed row) are split across the cores; each range
// zeroes its rows' padding and writes its rows of every (a, b) plane, so its pages are first touched by its own
// thread. Each (o, c) is computed alone, so U does not depend on the split.
Floats Winograd(const Floats& g, int64_t outs, int64_t ins, int tile, bool packed, int threads) {
  const std::vector<double> gm = WinogradG(tile);
  const int64_t alpha = tile + 2, o4 = (outs + kLanes - 1) / kLanes, cp = (ins + kLanes - 1) / kLanes * kLanes;
  const int64_t rows = packed ? o4 : outs, row = packed ? cp * kLanes : ins, plane = rows * row;
  Floats u(static_cast<size_t>(alpha * alpha * plane));  // written whole below
  // a range is at least this many (o, c) pairs, some 0.3 ms of work, ten times a thread's start (and small enough
  // that tests/native/test_weight_forms.py's 64-channel convs split on two cores)
  constexpr int64_t kPairsPerRange = 2048;
  const int64_t pairs_per_row = packed ? kLanes * ins : ins;
  ParallelFor(rows, std::max<int64_t>(1, kPairsPerRange / std::max<int64_t>(pairs_per_row, 1)), threads,
              [&](int64_t first_row, int64_t end_row) {
    if (packed) {  // the padded channels' entries stay zero
      for (int64_t ab = 0; ab < alpha * alpha; ++ab) {
        std::fill_n(u.begin() + ab * plane + first_row * row, (end_row - first_row) * row, 0.0f);
      }
    }
    const int64_t first = packed ? first_row * kLanes : first_row;
    const int64_t end = std::min(outs, packed ? end_row * kLanes : end_row);
    for (int64_t o = first; o < end; ++o) {
      for (int64_t c = 0; c < ins; ++c) {
        double w[9], t[3][6];
        for (int k = 0; k < 9; ++k) w[k] = g[static_cast<size_t>((o * ins + c) * 9 + k)];
        for (int r = 0; r < 3; ++r) {
          for (int64_t b = 0; b < alpha; ++b) {
            t[r][b] = w[r * 3 + 0] * gm[b * 3 + 0] + w[r * 3 + 1] * gm[b * 3 + 1] + w[r * 3 + 2] * gm[b * 3 + 2];
          }
        }
        const int64_t at = packed ? ((o / kLanes) * cp + c) * kLanes + o % kLanes : o * ins + c;
        for (int64_t a = 0; a < alpha; ++a) {
          for (int64_t b = 0; b < alpha; ++b) {
            const double value = gm[a * 3 + 0] * t[0][b] + gm[a * 3 + 1] * t[1][b] + gm[a * 3 + 2] * t[2][b];
            u[static_cast<size_t>((a * alpha + b) * plane + at)] = static_cast<float>(value);
          }
        }
      }
    }
  });
  return u;
}

// The (O, I, KH, KW) weight w packed to OIHW4o as adreno/targets/layout.py pack_oihw4o lays it out, into `shape`
// (ceil(O/4), I', KH, KW, 4): output channel o at [o / 4, i, kh, kw, o % 4], I' being I padded to a multiple of 4 or
// I itself (the depthwise form); padded channels zero. Returns an empty vector when `shape` is neither.
Floats PackOihw4o(const Floats& w, const std::vector<int64_t>& oihw, const std::vector<int64_t>& shape) {
  const int64_t outs = oihw[0], ins = oihw[1], taps = oihw[2] * oihw[3];
  const int64_t width = shape.size() == 5 ? shape[1] : -1;
  if (shape != std::vector<int64_t>{(outs + kLanes - 1) / kLanes, width, oihw[2], oihw[3], kLanes} ||
      (width != ins && width != (ins + kLanes - 1) / kLanes * kLanes)) {
    return {};
  }
  Floats packed(static_cast<size_t>(CheckedElements(shape, "packed weight")), 0.0f);
  for (int64_t o = 0; o < outs; ++o) {
    for (int64_t i = 0; i < ins; ++i) {
      for (int64_t k = 0; k < taps; ++k) {
        packed[static_cast<size_t>((((o / kLanes) * width + i) * taps + k) * kLanes + o % kLanes)] =
            w[static_cast<size_t>((o * ins + i) * taps + k)];
      }
    }
  }
  return packed;
}

// The (rows, cols) matrix m transposed to (cols, rows), as numpy's m.T made contiguous.
Floats Transposed(const Floats& m, int64_t rows, int64_t cols) {
  Floats out(m.size());  // written whole
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t c = 0; c < cols; ++c) out[static_cast<size_t>(c * rows + r)] = m[static_cast<size_t>(r * cols + c)];
  }
  return out;
}

// The param rebuilt from its stored form (ParamValues without the memory status).
Floats Rebuilt(const std::string& name, const NpyView& stored, const StoredForm& form,
               const std::vector<int64_t>& shape, int threads) {
  if (stored.dtype != "float32" && stored.dtype != "float16" && stored.dtype != "int8" && stored.dtype != "uint8") {
    throw std::runtime_error("param " + name + " is stored as " + stored.dtype + "; only float and int8 / uint8 "
                             "weights are rebuilt");
  }
  Floats values = SourceValues(name, stored, form);
  std::vector<int64_t> got;
  if (form.transform == "none" && form.packed) {
    if (stored.shape.size() != 4) throw std::runtime_error("param " + name + ": a packed weight stored as " +
                                                           ShapeText(stored.shape));
    values = PackOihw4o(values, stored.shape, shape);
    if (values.empty()) {
      throw std::runtime_error("param " + name + ": a weight stored as " + ShapeText(stored.shape) +
                               " does not pack to the plan's " + ShapeText(shape) + "; recompile the model");
    }
    got = shape;
  } else if (form.transform == "none") {
    got = stored.shape;
  } else if (form.transform == "transpose") {
    if (stored.shape.size() != 2) throw std::runtime_error("param " + name + ": a transposed weight stored as " +
                                                           ShapeText(stored.shape));
    values = Transposed(values, stored.shape[0], stored.shape[1]);
    got = {stored.shape[1], stored.shape[0]};
  } else if (form.transform == "winograd2" || form.transform == "winograd4") {
    if (stored.shape.size() != 4 || stored.shape[2] != 3 || stored.shape[3] != 3) {
      throw std::runtime_error("param " + name + ": a Winograd weight stored as " + ShapeText(stored.shape));
    }
    const int tile = form.transform == "winograd2" ? 2 : 4;
    const int64_t alpha = tile + 2, outs = stored.shape[0], ins = stored.shape[1];
    values = Winograd(values, outs, ins, tile, form.packed, threads);
    got = form.packed ? std::vector<int64_t>{alpha, alpha, (outs + kLanes - 1) / kLanes,
                                             (ins + kLanes - 1) / kLanes * kLanes, kLanes}
                      : std::vector<int64_t>{alpha, alpha, outs, ins};
  } else {
    throw std::runtime_error("param " + name + ": unknown stored transform '" + form.transform + "'");
  }
  if (got != shape) {
    throw std::runtime_error("param " + name + ": its stored form gives " + ShapeText(got) + ", the plan says " +
                             ShapeText(shape));
  }
  return values;
}

}  // namespace

Floats ParamValues(const std::string& name, const NpyView& stored, const StoredForm& form,
                   const std::vector<int64_t>& shape, int threads) {
  try {
    return Rebuilt(name, stored, form, shape, threads);
  } catch (const std::bad_alloc&) {
    throw std::runtime_error("param " + name + ": its rebuilt form (plan shape " + ShapeText(shape) + ") does not "
                             "fit in memory");
  }
}

bool WidensToInt32(const StoredForm& form) {
  return form.quantized && !form.packed && (form.transform == "none" || form.transform == "transpose") &&
         std::all_of(form.scale.begin(), form.scale.end(), [](float scale) { return scale == 1.0f; });
}

std::vector<int32_t> WidenedParamValues(const std::string& name, const NpyView& stored, const StoredForm& form,
                                        const std::vector<int64_t>& shape) {
  if (!WidensToInt32(form)) {
    throw std::runtime_error("param " + name + ": an int32 param stored as " + stored.dtype + " in a form other than "
                             "an int8 / uint8 member of scale 1; recompile the model");
  }
  const Floats values = ParamValues(name, stored, form, shape, 1);
  return std::vector<int32_t>(values.begin(), values.end());  // integers of at most 510 in magnitude: exact
}

}  // namespace adreno_harness
