// The safetensors format: header parsing and validation, positioned reads, writing. No Tensor here.
#include "io/safetensors_format.h"
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>
#include <algorithm>
#include <bit>
#include <cerrno>
#include <cstring>
#include <set>
#include <tuple>
#include <nlohmann/json.hpp>
#include "core/error.h"

namespace tr::io::safetensors {

static_assert(std::endian::native == std::endian::little, "safetensors data is little-endian; so is the host");

namespace {

using json = nlohmann::json;

struct DtypeDesc {
  Dtype dtype;
  const char* name;
  int bits;
};
// The reference's Dtype::bitsize table.
constexpr DtypeDesc kDtypes[kNumDtypes] = {
    {Dtype::BOOL, "BOOL", 8},       {Dtype::F4, "F4", 4},           {Dtype::F6_E2M3, "F6_E2M3", 6},
    {Dtype::F6_E3M2, "F6_E3M2", 6}, {Dtype::U8, "U8", 8},           {Dtype::I8, "I8", 8},
    {Dtype::F8_E5M2, "F8_E5M2", 8}, {Dtype::F8_E4M3, "F8_E4M3", 8}, {Dtype::F8_E8M0, "F8_E8M0", 8},
    {Dtype::I16, "I16", 16},        {Dtype::U16, "U16", 16},        {Dtype::F16, "F16", 16},
    {Dtype::BF16, "BF16", 16},      {Dtype::I32, "I32", 32},        {Dtype::U32, "U32", 32},
    {Dtype::F32, "F32", 32},        {Dtype::C64, "C64", 64},        {Dtype::F64, "F64", 64},
    {Dtype::I64, "I64", 64},        {Dtype::U64, "U64", 64},
};

const DtypeDesc& desc(Dtype d) {
  auto i = size_t(d);
  TR_CHECK(i < size_t(kNumDtypes), "safetensors: invalid Dtype value ", i);
  return kDtypes[i];
}

// Bytes of `shape` elements of `d`, or an error message (overflow, or sub-byte dtypes that do not
// end on a byte boundary). Mirrors Metadata::validate: checked product, then bits / 8.
std::optional<uint64_t> byte_size(Dtype d, const std::vector<uint64_t>& shape, std::string* why) {
  uint64_t n = 1;
  for (uint64_t s : shape) {
    if (__builtin_mul_overflow(n, s, &n)) {
      *why = str("the element count of shape ", shape, " overflows 64 bits");
      return std::nullopt;
    }
  }
  uint64_t bits = 0;
  if (__builtin_mul_overflow(n, uint64_t(desc(d).bits), &bits)) {
    *why = str("the byte size of ", desc(d).name, " ", shape, " overflows 64 bits");
    return std::nullopt;
  }
  if (bits % 8 != 0) {
    *why = str(n, " elements of ", desc(d).name, " (", desc(d).bits, " bits each) are not a whole number of bytes");
    return std::nullopt;
  }
  return bits / 8;
}

// A short description of an untrusted JSON value for an error message (never a deep dump).
std::string describe(const json& v) {
  if (v.is_structured()) return str("a JSON ", v.type_name());
  std::string s = v.dump();
  if (s.size() > 60) s = s.substr(0, 57) + "...";
  return s;
}

// Parses the header rejecting duplicate keys at any depth: the format forbids them and a JSON
// library that keeps the last one would let a file show two readers two different tensors.
json parse_json(std::string_view text, const std::string& source) {
  std::vector<std::set<std::string>> open_objects;
  auto on_event = [&](int, json::parse_event_t ev, json& parsed) {
    if (ev == json::parse_event_t::object_start) {
      open_objects.emplace_back();
    } else if (ev == json::parse_event_t::object_end) {
      if (!open_objects.empty()) open_objects.pop_back();
    } else if (ev == json::parse_event_t::key && !open_objects.empty()) {
      const auto& k = parsed.get_ref<const std::string&>();
      TR_CHECK(open_objects.back().insert(k).second, source, ": invalid safetensors header: duplicate key \"", k,
               "\" (the format forbids duplicate keys)");
    }
    return true;
  };
  try {
    return json::parse(text.begin(), text.end(), on_event, /*allow_exceptions=*/true, /*ignore_comments=*/false);
  } catch (const json::exception& e) {
    throw Error(str(source, ": invalid safetensors header: not valid JSON (", e.what(), ")"));
  }
}

uint64_t get_unsigned(const json& v, const std::string& where, const std::string& what) {
  TR_CHECK(v.is_number_unsigned(), where, what, " is ", describe(v), ", expected a non-negative integer");
  return v.get<uint64_t>();
}

TensorInfo parse_entry(const std::string& name, const json& v, uint64_t data_size, const std::string& source) {
  const std::string where = str(source, ": invalid safetensors header: tensor '", name, "': ");
  TR_CHECK(v.is_object(), where, "entry is ", describe(v), ", expected an object {dtype, shape, data_offsets}");
  auto field = [&](const char* key) -> const json& {
    auto it = v.find(key);
    TR_CHECK(it != v.end(), where, "lacks \"", key, "\"");
    return *it;
  };
  TensorInfo t;
  t.name = name;

  const json& dt = field("dtype");
  TR_CHECK(dt.is_string(), where, "dtype is ", describe(dt), ", expected a string");
  auto d = dtype_from_name(dt.get_ref<const std::string&>());
  TR_CHECK(d, where, "unknown dtype ", describe(dt), " (known: ", known_dtype_names(), ")");
  t.dtype = *d;

  const json& shape = field("shape");
  TR_CHECK(shape.is_array(), where, "shape is ", describe(shape), ", expected an array of non-negative integers");
  t.shape.reserve(shape.size());
  for (size_t i = 0; i < shape.size(); ++i) t.shape.push_back(get_unsigned(shape[i], where, str("shape[", i, "]")));

  const json& offs = field("data_offsets");
  TR_CHECK(offs.is_array() && offs.size() == 2, where, "data_offsets is ", describe(offs),
           offs.is_array() ? str(" with ", offs.size(), " entries") : std::string(), ", expected [begin, end]");
  t.begin = get_unsigned(offs[0], where, "data_offsets[0]");
  t.end = get_unsigned(offs[1], where, "data_offsets[1]");
  TR_CHECK(t.begin <= t.end, where, "data_offsets [", t.begin, ", ", t.end, "] end before they begin");

  std::string why;
  auto need = byte_size(t.dtype, t.shape, &why);
  TR_CHECK(need, where, why);
  TR_CHECK(*need == t.nbytes(), where, desc(t.dtype).name, " ", t.shape, " needs ", *need, " bytes but data_offsets [",
           t.begin, ", ", t.end, "] span ", t.nbytes());
  TR_CHECK(t.end <= data_size, where, "data_offsets [", t.begin, ", ", t.end, "] run past the end of the data buffer (",
           data_size, " bytes; truncated file?)");
  return t;
}

std::map<std::string, std::string> parse_metadata(const json& v, const std::string& source) {
  std::map<std::string, std::string> out;
  if (v.is_null()) return out;  // the reference reads it as Option<HashMap<String, String>>
  TR_CHECK(v.is_object(), source, ": invalid safetensors header: __metadata__ is ", describe(v),
           ", expected an object of strings");
  for (auto& [k, mv] : v.items()) {
    TR_CHECK(mv.is_string(), source, ": invalid safetensors header: __metadata__[\"", k, "\"] is ", describe(mv),
             ", expected a string");
    out[k] = mv.get<std::string>();
  }
  return out;
}

// The tensors must tile [0, data_size): sorted by offset, each begins where the previous ended.
void check_tiling(std::vector<TensorInfo>& ts, uint64_t data_size, const std::string& source) {
  std::stable_sort(ts.begin(), ts.end(), [](const TensorInfo& a, const TensorInfo& b) {
    return std::tie(a.begin, a.end) < std::tie(b.begin, b.end);
  });
  const std::string where = str(source, ": invalid safetensors header: ");
  uint64_t pos = 0;
  const TensorInfo* prev = nullptr;
  for (const TensorInfo& t : ts) {
    TR_CHECK(t.begin >= pos, where, "tensor '", t.name, "' [", t.begin, ", ", t.end, ") overlaps tensor '", prev->name,
             "' [", prev->begin, ", ", prev->end, ")");
    if (t.begin > pos) {
      if (prev)
        throw Error(str(where, "a hole of ", t.begin - pos, " bytes between tensor '", prev->name, "' (ends at ", pos,
                        ") and tensor '", t.name, "' (starts at ", t.begin,
                        "); the tensors must cover the data exactly"));
      throw Error(str(where, "a hole of ", t.begin, " bytes before the first tensor '", t.name,
                      "'; the tensors must cover the data exactly"));
    }
    pos = t.end;
    prev = &t;
  }
  TR_CHECK(pos == data_size, where, "the data buffer is ", data_size, " bytes but the tensors cover ", pos, " (",
           data_size - pos, " trailing bytes)");
}

// read/write that finish the job or throw (EINTR and short transfers are retried).
void pread_exact(int fd, void* dst, uint64_t n, uint64_t off, const std::string& path) {
  auto* p = static_cast<char*>(dst);
  while (n > 0) {
    size_t chunk = size_t(std::min<uint64_t>(n, uint64_t(1) << 30));
    ssize_t r = ::pread(fd, p, chunk, off_t(off));
    if (r < 0 && errno == EINTR) continue;
    TR_CHECK(r >= 0, path, ": read failed at byte ", off, ": ", std::strerror(errno));
    TR_CHECK(r > 0, path, ": file ends at byte ", off, ", before the ", n,
             " more bytes the header promises (it shrank "
             "while being read?)");
    p += r;
    off += uint64_t(r);
    n -= uint64_t(r);
  }
}

void write_exact(int fd, const void* src, uint64_t n, const std::string& path) {
  auto* p = static_cast<const char*>(src);
  while (n > 0) {
    size_t chunk = size_t(std::min<uint64_t>(n, uint64_t(1) << 30));
    ssize_t r = ::write(fd, p, chunk);
    if (r < 0 && errno == EINTR) continue;
    TR_CHECK(r > 0, path, ": write failed: ", std::strerror(errno));
    p += r;
    n -= uint64_t(r);
  }
}

}  // namespace

const char* dtype_name(Dtype d) { return desc(d).name; }
int dtype_bits(Dtype d) { return desc(d).bits; }

std::optional<Dtype> dtype_from_name(std::string_view s) {
  for (const auto& d : kDtypes)
    if (s == d.name) return d.dtype;
  return std::nullopt;
}

std::string known_dtype_names() {
  std::string out;
  for (const auto& d : kDtypes) out += (out.empty() ? "" : " ") + std::string(d.name);
  return out;
}

uint64_t TensorInfo::numel() const {
  uint64_t n = 1;
  for (uint64_t s : shape) n *= s;
  return n;
}

const TensorInfo* Header::find(std::string_view name) const {
  for (const auto& t : tensors)
    if (t.name == name) return &t;
  return nullptr;
}

uint64_t parse_header_length(const unsigned char* prefix, uint64_t file_size, const std::string& source) {
  TR_CHECK(file_size >= kPrefixSize, source, ": not a safetensors file: ", file_size,
           " bytes, shorter than the 8-byte header length");
  uint64_t n = 0;
  for (int i = 0; i < 8; ++i) n |= uint64_t(prefix[i]) << (8 * i);
  TR_CHECK(n <= kMaxHeaderSize, source, ": invalid safetensors file: header length ", n, " exceeds the limit of ",
           kMaxHeaderSize, " bytes");
  TR_CHECK(n <= file_size - kPrefixSize, source, ": invalid safetensors file: header length ", n,
           " runs past the end of the file (", file_size, " bytes; truncated?)");
  return n;
}

Header parse_header(std::string_view text, uint64_t file_size, const std::string& source) {
  TR_CHECK(file_size >= kPrefixSize && text.size() <= file_size - kPrefixSize, source, ": header of ", text.size(),
           " bytes does not fit a file of ", file_size, " bytes");
  // The format's header is a JSON object; checking the first byte keeps any other document away
  // from the JSON parser's deeper paths.
  size_t first = text.find_first_not_of(" \t\r\n");
  TR_CHECK(first != std::string_view::npos && text[first] == '{', source,
           ": invalid safetensors header: it must be a JSON object (starting with '{')");
  // JSON never holds a raw NUL, and nlohmann's lexer would take one for the end of the input,
  // accepting whatever follows: a file the reference reader rejects.
  size_t nul = text.find('\0');
  TR_CHECK(nul == std::string_view::npos, source, ": invalid safetensors header: a NUL byte at header offset ", nul,
           " (not valid JSON)");
  json h = parse_json(text, source);
  TR_CHECK(h.is_object(), source, ": invalid safetensors header: it is ", describe(h), ", expected a JSON object");

  Header out;
  out.header_size = text.size();
  out.data_size = file_size - kPrefixSize - text.size();
  out.tensors.reserve(h.size());
  for (auto& [name, v] : h.items()) {
    if (name == "__metadata__")
      out.metadata = parse_metadata(v, source);
    else
      out.tensors.push_back(parse_entry(name, v, out.data_size, source));
  }
  check_tiling(out.tensors, out.data_size, source);
  return out;
}

Header parse(const void* bytes, size_t size, const std::string& source) {
  TR_CHECK(size >= kPrefixSize, source, ": not a safetensors file: ", size,
           " bytes, shorter than the 8-byte header length");
  auto* b = static_cast<const unsigned char*>(bytes);
  uint64_t n = parse_header_length(b, size, source);
  return parse_header(std::string_view(reinterpret_cast<const char*>(b) + kPrefixSize, size_t(n)), size, source);
}

Header read_header(const std::string& path) { return Reader(path).header(); }

Reader::Reader(const std::string& path) : path_(path) {
  fd_ = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  TR_CHECK(fd_ >= 0, "cannot open '", path, "': ", std::strerror(errno));
  try {
    struct stat st {};
    TR_CHECK(::fstat(fd_, &st) == 0, path, ": stat failed: ", std::strerror(errno));
    TR_CHECK(S_ISREG(st.st_mode), path, ": not a regular file");
    uint64_t size = uint64_t(st.st_size);
    TR_CHECK(size >= kPrefixSize, path, ": not a safetensors file: ", size,
             " bytes, shorter than the 8-byte header length");
    unsigned char prefix[kPrefixSize];
    pread_exact(fd_, prefix, kPrefixSize, 0, path);
    uint64_t n = parse_header_length(prefix, size, path);
    std::string text(size_t(n), '\0');
    pread_exact(fd_, text.data(), n, kPrefixSize, path);
    header_ = parse_header(text, size, path);
  } catch (...) {
    ::close(fd_);
    throw;
  }
}

Reader::~Reader() {
  if (fd_ >= 0) ::close(fd_);
}

void Reader::read(const TensorInfo& info, void* dst) const {
  // info normally comes from header(); the bound check keeps a foreign one from reading past the data.
  TR_CHECK(info.begin <= info.end && info.end <= header_.data_size, path_, ": tensor '", info.name,
           "' is outside this file's data buffer");
  pread_exact(fd_, dst, info.nbytes(), header_.data_start() + info.begin, path_);
}

std::string serialize_header(const std::vector<TensorData>& tensors,
                             const std::map<std::string, std::string>& metadata) {
  nlohmann::ordered_json h = nlohmann::ordered_json::object();
  if (!metadata.empty()) h["__metadata__"] = metadata;
  std::set<std::string> names;
  uint64_t off = 0;
  for (const auto& t : tensors) {
    TR_CHECK(t.name != "__metadata__", "safetensors: a tensor cannot be named \"__metadata__\"");
    TR_CHECK(names.insert(t.name).second, "safetensors: duplicate tensor name '", t.name, "'");
    std::string why;
    auto need = byte_size(t.dtype, t.shape, &why);
    TR_CHECK(need, "safetensors: tensor '", t.name, "': ", why);
    TR_CHECK(*need == t.nbytes, "safetensors: tensor '", t.name, "': ", dtype_name(t.dtype), " ", t.shape, " is ",
             *need, " bytes, but ", t.nbytes, " were given");
    TR_CHECK(t.data || t.nbytes == 0, "safetensors: tensor '", t.name, "' has no data");
    h[t.name] = {{"dtype", dtype_name(t.dtype)}, {"shape", t.shape}, {"data_offsets", {off, off + t.nbytes}}};
    off += t.nbytes;
  }
  std::string text;
  try {
    text = h.dump();
  } catch (const nlohmann::json::exception& e) {  // a name or metadata that is not UTF-8
    throw Error(str("safetensors: cannot encode the header: ", e.what()));
  }
  text.append((8 - text.size() % 8) % 8, ' ');  // the data starts 8-byte aligned
  TR_CHECK(text.size() <= kMaxHeaderSize, "safetensors: header of ", text.size(), " bytes exceeds the limit of ",
           kMaxHeaderSize);
  std::string out(kPrefixSize, '\0');
  for (size_t i = 0; i < kPrefixSize; ++i) out[i] = char(uint8_t(uint64_t(text.size()) >> (8 * i)));
  return out + text;
}

std::string serialize(const std::vector<TensorData>& tensors, const std::map<std::string, std::string>& metadata) {
  std::string out = serialize_header(tensors, metadata);
  for (const auto& t : tensors) out.append(static_cast<const char*>(t.data), size_t(t.nbytes));
  return out;
}

void write_file(const std::string& path, const std::vector<TensorData>& tensors,
                const std::map<std::string, std::string>& metadata) {
  std::string head = serialize_header(tensors, metadata);
  int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  TR_CHECK(fd >= 0, "cannot write '", path, "': ", std::strerror(errno));
  try {
    write_exact(fd, head.data(), head.size(), path);
    for (const auto& t : tensors) write_exact(fd, t.data, t.nbytes, path);
  } catch (...) {
    ::close(fd);
    throw;
  }
  TR_CHECK(::close(fd) == 0, path, ": close failed: ", std::strerror(errno));
}

}  // namespace tr::io::safetensors
