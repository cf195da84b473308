// The artifact's weight file, params.npz, read without Python or numpy: numpy.savez writes an uncompressed
// (stored) zip archive whose members are "<param>.npy" files. This reader takes exactly that: stored members,
// no ZIP64, each a .npy the harness's npy reader accepts; anything else is refused, naming the member.
#ifndef ADRENO_HARNESS_WEIGHTS_H_
#define ADRENO_HARNESS_WEIGHTS_H_

#include <map>
#include <string>

#include "npy.h"

namespace adreno_harness {

// param name (the member name without ".npy") -> array. Throws std::runtime_error.
std::map<std::string, NpyArray> ReadNpz(const std::string& path);

}  // namespace adreno_harness

#endif  // ADRENO_HARNESS_WEIGHTS_H_
