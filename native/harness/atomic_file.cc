#include "atomic_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <stdexcept>

namespace adreno_harness {

void WriteFileAtomically(const std::string& path, const std::string& bytes) {
  const std::string tmp = path + ".tmp." + std::to_string(getpid());
  int fd = open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  if (fd < 0) throw std::runtime_error(path + ": cannot write it (" + std::strerror(errno) + ")");
  size_t done = 0;
  while (done < bytes.size()) {
    ssize_t n = write(fd, bytes.data() + done, bytes.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      std::string why = std::strerror(errno);
      close(fd);
      unlink(tmp.c_str());
      throw std::runtime_error(path + ": write failed (" + why + ")");
    }
    done += static_cast<size_t>(n);
  }
  if (fsync(fd) != 0 || close(fd) != 0 || rename(tmp.c_str(), path.c_str()) != 0) {
    std::string why = std::strerror(errno);
    unlink(tmp.c_str());
    throw std::runtime_error(path + ": cannot put it in place (" + why + ")");
  }
}

std::string ReadFile(const std::string& path) {
  // O_NONBLOCK: a FIFO in a file's place is refused here instead of blocking the start in open() or read()
  int fd = open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC);
  struct stat info;
  if (fd < 0 || fstat(fd, &info) != 0) {
    const std::string why = std::strerror(errno);
    if (fd >= 0) close(fd);
    throw std::runtime_error(path + ": cannot open it (" + why + ")");
  }
  if (!S_ISREG(info.st_mode)) {
    close(fd);
    throw std::runtime_error(path + ": not a regular file");
  }
  std::string bytes;
  try {
    bytes.resize(static_cast<size_t>(info.st_size));
  } catch (const std::bad_alloc&) {
    close(fd);
    throw std::runtime_error(path + ": " + std::to_string(info.st_size) + " bytes do not fit in memory");
  }
  size_t done = 0;
  while (done < bytes.size()) {
    ssize_t n = read(fd, bytes.data() + done, bytes.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      const std::string why = n < 0 ? std::strerror(errno) : "it shrank while read";
      close(fd);
      throw std::runtime_error(path + ": cannot read it (" + why + ")");
    }
    done += static_cast<size_t>(n);
  }
  close(fd);
  return bytes;
}

}  // namespace adreno_harness
