// Work split across the host's cores, for the loops of an app's start (the Winograd weights' transform): on a
// phone the start waits for them, and the eight cores it has are idle while it does.
#ifndef ADRENO_HARNESS_PARALLEL_H_
#define ADRENO_HARNESS_PARALLEL_H_

#include <algorithm>
#include <cstdint>
#include <exception>
#include <system_error>
#include <thread>
#include <vector>

namespace adreno_harness {

// Calls body(begin, end) on disjoint ranges covering [0, count), on up to `max_threads` threads (0: one per core; an
// app sets fewer to leave its own threads their cores), in ranges of at least `grain` items (fewer threads when
// there is less work: a thread costs tens of microseconds to start).
// `body` must write only what its range owns. The first exception a range throws is rethrown here, after every
// thread has been joined: no thread outlives the call, even when one cannot be started (a process at its thread
// limit), whose range this thread then runs itself.
template <typename Body>
void ParallelFor(int64_t count, int64_t grain, int max_threads, const Body& body) {
  const int64_t cores =
      max_threads > 0 ? max_threads : std::max<int64_t>(1, static_cast<int64_t>(std::thread::hardware_concurrency()));
  const int64_t ranges = std::clamp<int64_t>(count / std::max<int64_t>(grain, 1), 1, cores);
  if (ranges == 1) {
    body(int64_t{0}, count);
    return;
  }
  std::vector<std::exception_ptr> failures(static_cast<size_t>(ranges));
  std::vector<std::thread> threads;
  threads.reserve(static_cast<size_t>(ranges - 1));
  auto run = [&](int64_t range) {
    try {
      body(count * range / ranges, count * (range + 1) / ranges);
    } catch (...) {
      failures[static_cast<size_t>(range)] = std::current_exception();
    }
  };
  for (int64_t range = 1; range < ranges; ++range) {
    try {
      threads.emplace_back(run, range);
    } catch (const std::system_error&) {
      run(range);
    }
  }
  run(0);
  for (std::thread& thread : threads) thread.join();
  for (const std::exception_ptr& failure : failures) {
    if (failure) std::rethrow_exception(failure);
  }
}

}  // namespace adreno_harness

#endif  // ADRENO_HARNESS_PARALLEL_H_
