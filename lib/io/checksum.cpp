// CRC-32 of buffers and files, via zlib.
#include "io/checksum.h"
#include <fcntl.h>
#include <unistd.h>
#include <zlib.h>
#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <vector>
#include "core/error.h"

namespace tr::io {

uint32_t crc32_update(uint32_t crc, const void* data, size_t n) {
  return uint32_t(crc32_z(crc, static_cast<const Bytef*>(data), n));
}

std::string crc32_hex(uint32_t crc) {
  char buf[9];
  std::snprintf(buf, sizeof buf, "%08x", crc);
  return buf;
}

FileChecksum checksum_file(const std::string& path) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  TR_CHECK(fd >= 0, "cannot open '", path, "': ", std::strerror(errno));
  std::vector<unsigned char> buf(size_t(1) << 20);
  FileChecksum out;
  for (;;) {
    ssize_t r = ::read(fd, buf.data(), buf.size());
    if (r < 0 && errno == EINTR) continue;
    if (r < 0) {
      int err = errno;
      ::close(fd);
      throw Error(str(path, ": read failed at byte ", out.size, ": ", std::strerror(err)));
    }
    if (r == 0) break;
    out.crc32 = crc32_update(out.crc32, buf.data(), size_t(r));
    out.size += uint64_t(r);
  }
  ::close(fd);
  return out;
}

}  // namespace tr::io
