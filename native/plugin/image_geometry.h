// Where a packed tensor lives in an OpenCL image: the scope table of adreno/targets/layout.py, written once for C++.
//
// A packed tensor has shape (d0, d1, d2, d3, 4): its last axis is one RGBA pixel. Every texture scope maps it to
// an image2d_array of RGBA pixels whose host pixel array (layers, height, width, 4) is a reshape of the tensor:
//   global.texture         width d3,        height d2, layers d0*d1   (activations)
//   global.texture-nhwc    width d2*d3,     height d1, layers d0      (activations whose d0*d1 is too deep)
//   global.texture-weight  width d1*d2*d3,  height d0, layers 1       (weights and other constants)
// tests/test_native_plugin.py checks this table against adreno.targets.layout.image_dims for every scope.
#ifndef ADRENO_NATIVE_IMAGE_GEOMETRY_H_
#define ADRENO_NATIVE_IMAGE_GEOMETRY_H_

#include <cstdint>
#include <optional>
#include <stdexcept>
#include <string>

namespace adreno_native {

enum class TextureScope { kActivation, kActivationNHWC, kWeight };

struct ImageDims {
  size_t width, height, layers;
  bool operator==(const ImageDims& o) const {
    return width == o.width && height == o.height && layers == o.layers;
  }
};

// The texture scope named by a TVM memory scope, or nullopt for a buffer scope ("", "global").
// Throws std::invalid_argument for any other scope, so an unknown one is never silently a buffer.
inline std::optional<TextureScope> ParseScope(const std::string& scope) {
  if (scope.empty() || scope == "global") return std::nullopt;
  if (scope == "global.texture") return TextureScope::kActivation;
  if (scope == "global.texture-nhwc") return TextureScope::kActivationNHWC;
  if (scope == "global.texture-weight") return TextureScope::kWeight;
  throw std::invalid_argument("memory scope '" + scope +
                              "' is not global, global.texture, global.texture-nhwc or global.texture-weight");
}

// The image of a packed tensor of `shape` (ndim values) in `scope`; throws std::invalid_argument when the tensor
// is not packed (5-D with a last axis of 4).
inline ImageDims TextureDims(int ndim, const int64_t* shape, TextureScope scope) {
  if (ndim != 5 || shape[4] != 4) {
    std::string dims;
    for (int i = 0; i < ndim; ++i) dims += (i ? "x" : "") + std::to_string(shape[i]);
    throw std::invalid_argument("a texture tensor must be packed (d0, d1, d2, d3, 4), not " + dims);
  }
  const size_t d0 = shape[0], d1 = shape[1], d2 = shape[2], d3 = shape[3];
  switch (scope) {
    case TextureScope::kActivation:
      return {d3, d2, d0 * d1};
    case TextureScope::kActivationNHWC:
      return {d2 * d3, d1, d0};
    case TextureScope::kWeight:
      return {d1 * d2 * d3, d0, 1};
  }
  throw std::invalid_argument("unknown texture scope");
}

}  // namespace adreno_native

#endif  // ADRENO_NATIVE_IMAGE_GEOMETRY_H_
