#include "data/decode_cache.h"
#include <fcntl.h>
#include <libdeflate.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>
#include <atomic>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include "core/error.h"

namespace tr::data {

namespace fs = std::filesystem;

namespace {

constexpr char kMagic[8] = {'T', 'R', 'D', 'C', 'A', 'C', 'H', 'E'};
constexpr uint32_t kVersion = 1;

// What identifies a source's content: size, mtime and its last 8 bytes (a gzip member's CRC32 and
// length, so a rewrite that keeps size and mtime is still seen).
struct SourceId {
  uint64_t size = 0;
  int64_t mtime_ns = 0;
  uint8_t tail[8] = {};
  bool operator==(const SourceId& o) const {
    return size == o.size && mtime_ns == o.mtime_ns && std::memcmp(tail, o.tail, 8) == 0;
  }
};

// An entry: this header, the source's absolute path, padding to 64 bytes, the decoded bytes.
struct Header {
  char magic[8];
  uint32_t version;
  uint32_t path_len;
  SourceId source;
  uint64_t data_offset;
  uint64_t data_size;
  uint32_t data_crc32;
  uint32_t header_crc32;  // of the header with this field 0, then the path
};
static_assert(sizeof(Header) == 64);  // no padding: the bytes written are the fields

uint32_t header_crc(Header h, const std::string& path) {
  h.header_crc32 = 0;
  return libdeflate_crc32(libdeflate_crc32(0, &h, sizeof h), path.data(), path.size());
}

SourceId id_of(const FileBytes& b) {
  SourceId id;
  id.size = b.size;
  id.mtime_ns = b.mtime_ns;
  if (b.size >= 8) std::memcpy(id.tail, b.data + b.size - 8, 8);
  return id;
}

// The source's identity now (stat + its last 8 bytes); none when it cannot be read.
std::optional<SourceId> id_now(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return std::nullopt;
  struct stat st {};
  SourceId id;
  bool ok = ::fstat(fd, &st) == 0;
  if (ok) {
    id.size = uint64_t(st.st_size);
    id.mtime_ns = int64_t(st.st_mtim.tv_sec) * 1000000000 + st.st_mtim.tv_nsec;
    if (id.size >= 8) ok = ::pread(fd, id.tail, 8, off_t(id.size - 8)) == 8;
  }
  ::close(fd);
  return ok ? std::optional<SourceId>(id) : std::nullopt;
}

// What differs between the source as cached and as it is now.
std::string changes(const SourceId& was, const std::optional<SourceId>& now) {
  if (!now) return "it cannot be read";
  std::string s;
  auto add = [&](const std::string& what) { s += (s.empty() ? "" : ", ") + what; };
  if (was.size != now->size) add(str("size ", was.size, " -> ", now->size, " bytes"));
  if (was.mtime_ns != now->mtime_ns) add("modification time");
  if (std::memcmp(was.tail, now->tail, 8) != 0) add("last 8 bytes (gzip's CRC32 and length)");
  return s;
}

std::string absolute_path(const std::string& p) {
  std::error_code ec;
  fs::path a = fs::absolute(p, ec);
  return (ec ? fs::path(p) : a).lexically_normal().string();
}

std::string hex64(uint64_t v) {
  char buf[17];
  std::snprintf(buf, sizeof buf, "%016llx", (unsigned long long)v);
  return buf;
}

}  // namespace

std::string DecodeCache::cache_root() {
  if (const char* d = std::getenv("TRAINER_CACHE_DIR"); d && *d) return d;
  if (const char* x = std::getenv("XDG_CACHE_HOME"); x && *x) return str(x, "/trainer");
  if (const char* h = std::getenv("HOME"); h && *h) return str(h, "/.cache/trainer");
  return "";
}

std::string DecodeCache::default_dir() {
  if (const char* d = std::getenv("TRAINER_CACHE_DIR"); d && *d) return d;  // the entries directly in it
  const std::string root = cache_root();
  return root.empty() ? "" : root + "/datasets";
}

std::string DecodeCache::entry_path(const std::string& source) const {
  const std::string abs = absolute_path(source);
  uint64_t h = 1469598103934665603ull;  // FNV-1a of the absolute path: one entry per source
  for (unsigned char c : abs) h = (h ^ c) * 1099511628211ull;
  return str(dir_, "/", fs::path(abs).filename().string(), ".", hex64(h), ".decoded");
}

std::optional<FileBytes> DecodeCache::find(const std::string& source) {
  const std::string path = entry_path(source);
  std::error_code ec;
  if (!fs::exists(path, ec)) return std::nullopt;
  auto damaged = [&](const std::string& why) -> std::optional<FileBytes> {
    notes_.push_back(str("dataset cache entry '", path, "' is damaged (", why, "); not used: decoding '", source,
                         "' again and rewriting it"));
    return std::nullopt;
  };
  FileBytes e;
  try {
    e = map_file(path, "dataset cache");
  } catch (const Error& err) { return damaged(err.what()); }
  Header h;
  if (e.size < sizeof h)
    return damaged(str("truncated: ", e.size, " bytes, shorter than its ", sizeof h, "-byte header"));
  std::memcpy(&h, e.data, sizeof h);
  if (std::memcmp(h.magic, kMagic, 8) != 0) return damaged("not a trainer cache entry: bad magic");
  if (h.version != kVersion) return damaged(str("format version ", h.version, ", expected ", kVersion));
  if (h.path_len > 4096 || sizeof h + h.path_len > e.size) return damaged("truncated inside its header");
  const std::string stored(reinterpret_cast<const char*>(e.data + sizeof h), h.path_len);
  if (header_crc(h, stored) != h.header_crc32) return damaged("header checksum mismatch");
  const std::optional<SourceId> now = id_now(source);
  if (stored != absolute_path(source) || !now || !(*now == h.source)) {
    const std::string why = stored != absolute_path(source)
                                ? str("it was made from '", stored, "'")
                                : str("'", source, "' changed since: ", changes(h.source, now));
    notes_.push_back(str("dataset cache entry '", path, "' is stale (", why, "); decoding '", source, "' again"));
    return std::nullopt;
  }
  if (h.data_offset < sizeof h + h.path_len || h.data_offset > e.size || e.size - h.data_offset != h.data_size)
    return damaged(str("truncated or padded: ", e.size, " bytes, expected ", h.data_offset + h.data_size));
  if (libdeflate_crc32(0, e.data + h.data_offset, h.data_size) != h.data_crc32)
    return damaged("data checksum mismatch");
  FileBytes b;
  b.data = e.data + h.data_offset;
  b.size = size_t(h.data_size);
  b.owner = e.owner;
  return b;
}

std::unique_ptr<DecodeCache::Entry> DecodeCache::begin_store(const std::string& source, const FileBytes& source_bytes,
                                                             size_t size) {
  const std::string path = entry_path(source);
  const std::string abs = absolute_path(source);
  auto fail = [&](const std::string& why) {
    notes_.push_back(str("could not write the dataset cache entry '", path, "' (", why, "); '", source,
                         "' will be decoded again on the next run"));
    return nullptr;
  };
  std::error_code ec;
  fs::create_directories(dir_, ec);
  if (ec) return fail(str("cannot create '", dir_, "': ", ec.message()));
  static std::atomic<int> counter{0};
  auto e = std::unique_ptr<Entry>(new Entry());
  e->cache_ = this;
  e->source_ = source;
  e->path_ = path;
  e->tmp_ = str(path, ".tmp.", ::getpid(), ".", counter++);
  Header h{};
  std::memcpy(h.magic, kMagic, 8);
  h.version = kVersion;
  h.path_len = uint32_t(abs.size());
  h.source = id_of(source_bytes);
  h.data_offset = (sizeof h + abs.size() + 63) / 64 * 64;
  h.data_size = size;
  const size_t total = h.data_offset + size;
  const int fd = ::open(e->tmp_.c_str(), O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
  if (fd < 0) return fail(std::strerror(errno));
  // The blocks are reserved first: a full disk is this error, not a SIGBUS while the decoder writes.
  const int rc = ::posix_fallocate(fd, 0, off_t(total));
  void* p = rc == 0 ? ::mmap(nullptr, total, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0) : MAP_FAILED;
  const int err = rc != 0 ? rc : errno;
  ::close(fd);
  if (p == MAP_FAILED) {
    ::unlink(e->tmp_.c_str());
    return fail(std::strerror(err));
  }
  e->file_.data = static_cast<uint8_t*>(p);
  e->file_.size = total;
  e->file_.owner = std::shared_ptr<const void>(p, [total](const void* q) { ::munmap(const_cast<void*>(q), total); });
  std::memcpy(e->file_.data, &h, sizeof h);
  std::memcpy(e->file_.data + sizeof h, abs.data(), abs.size());
  e->data_ = {e->file_.data + h.data_offset, size, e->file_.owner};
  return e;
}

void DecodeCache::Entry::commit() {
  Header h;
  std::memcpy(&h, file_.data, sizeof h);
  h.data_crc32 = libdeflate_crc32(0, data_.data, data_.size);
  const std::string abs(reinterpret_cast<const char*>(file_.data + sizeof h), h.path_len);
  h.header_crc32 = header_crc(h, abs);
  std::memcpy(file_.data, &h, sizeof h);
  // (no msync: the page cache serves later readers; a crash before writeback leaves an entry whose
  // checksum fails, which is rebuilt)
  if (::rename(tmp_.c_str(), path_.c_str()) != 0) {
    cache_->notes_.push_back(str("could not write the dataset cache entry '", path_, "' (", std::strerror(errno),
                                 "); '", source_, "' will be decoded again on the next run"));
    return;
  }
  committed_ = true;
}

DecodeCache::Entry::~Entry() {
  if (!committed_) ::unlink(tmp_.c_str());
}

void DecodeCache::store(const std::string& source, const FileBytes& source_bytes, const FileBytes& decoded) {
  std::unique_ptr<Entry> e = begin_store(source, source_bytes, decoded.size);
  if (!e) return;
  if (decoded.size > 0) std::memcpy(e->bytes().data, decoded.data, decoded.size);
  e->commit();
}

}  // namespace tr::data
