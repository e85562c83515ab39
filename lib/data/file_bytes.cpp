#include "data/file_bytes.h"
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>
#include <cerrno>
#include <cstring>
#include "core/error.h"

namespace tr::data {

FileBytes map_file(const std::string& path, const char* who, MapPages pages) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  TR_CHECK(fd >= 0, who, ": cannot open '", path, "': ", errno == ENOENT ? "no such file" : std::strerror(errno));
  struct stat st {};
  const int rc = ::fstat(fd, &st);
  const int err = errno;
  if (rc != 0 || S_ISDIR(st.st_mode)) ::close(fd);
  TR_CHECK(rc == 0, who, ": cannot stat '", path, "': ", std::strerror(err));
  TR_CHECK(!S_ISDIR(st.st_mode), who, ": '", path, "' is a directory, expected a file");
  FileBytes b;
  b.size = size_t(st.st_size);
  b.mtime_ns = int64_t(st.st_mtim.tv_sec) * 1000000000 + st.st_mtim.tv_nsec;
  if (b.size == 0) {
    ::close(fd);
    return b;
  }
  // Mapped read-only, with the pages read in if asked (populating a writable private mapping would
  // copy every page), then made writable: a stray write copies its page instead of faulting.
  const int populate = pages == MapPages::populate ? MAP_POPULATE : 0;
  void* p = ::mmap(nullptr, b.size, PROT_READ, MAP_PRIVATE | populate, fd, 0);
  const int map_err = errno;
  ::close(fd);
  TR_CHECK(p != MAP_FAILED, who, ": cannot map '", path, "' (", b.size, " bytes): ", std::strerror(map_err));
  ::mprotect(p, b.size, PROT_READ | PROT_WRITE);
  if (pages == MapPages::on_demand) ::madvise(p, b.size, MADV_RANDOM);  // a hint: failing, it costs read-ahead only
  const size_t n = b.size;
  b.owner = std::shared_ptr<const void>(p, [n](const void* q) { ::munmap(const_cast<void*>(q), n); });
  b.data = static_cast<uint8_t*>(p);
  return b;
}

FileBytes alloc_bytes(size_t n) {
  std::shared_ptr<uint8_t[]> buf(new uint8_t[n == 0 ? 1 : n]);  // default-initialised: no zeroing pass
  FileBytes b;
  b.data = buf.get();
  b.size = n;
  b.owner = std::move(buf);
  return b;
}

}  // namespace tr::data
