// The library's failures inside: an exception carrying the status code the C API returns for it. Every stage of a
// start says which code its failures are (Stage), so a TVM error while loading lib.so is a bad artifact and the
// same error while uploading a weight is a device failure.
#ifndef ADRENO_RT_RT_ERROR_H_
#define ADRENO_RT_RT_ERROR_H_

#include <stdexcept>
#include <string>

#include "adreno_rt.h"

namespace adreno_rt {

class RtError : public std::runtime_error {
 public:
  RtError(adreno_rt_code code, const std::string& message) : std::runtime_error(message), code_(code) {}
  adreno_rt_code code() const { return code_; }

 private:
  adreno_rt_code code_;
};

// The first line of an exception's message: TVM's errors carry a traceback after it.
std::string FirstLine(const std::exception& error);

// Runs `body`; any exception it throws other than an RtError becomes an RtError of `code`, its message prefixed
// by `what` ("lib.so: ..."; nothing when `what` is empty: the message names its file already).
template <typename Body>
auto Stage(adreno_rt_code code, const std::string& what, const Body& body) -> decltype(body()) {
  try {
    return body();
  } catch (const RtError&) {
    throw;
  } catch (const std::exception& error) {
    throw RtError(code, what.empty() ? FirstLine(error) : what + ": " + FirstLine(error));
  }
}

}  // namespace adreno_rt

#endif  // ADRENO_RT_RT_ERROR_H_
