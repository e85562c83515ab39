// The safetensors file format without tensors (huggingface/safetensors, tensor.rs): dtype names and
// widths, a header parser that validates everything before a byte of data is touched, a reader that
// copies one tensor's bytes at a time, and a writer. Only std and nlohmann::json, so that the
// sanitizer test builds this file alone.
//
// Layout: 8 bytes little-endian u64 N | N bytes of UTF-8 JSON, space-padded so the data starts
// 8-byte aligned | the data buffer. The JSON maps each tensor name to
// {"dtype": "F32", "shape": [2, 3], "data_offsets": [begin, end]} (offsets relative to the buffer),
// plus an optional "__metadata__": {str: str}. The tensors tile the buffer: sorted by offset, each
// starts where the previous ends, the first at 0, the last at the buffer's end (no overlap, no hole,
// no trailing bytes), as the reference reader requires.
#pragma once
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace tr::io::safetensors {

// Every dtype of the format, in the reference's order. Most are not tensor dtypes of ours: the
// format layer still knows their widths, so it validates any file; the Tensor layer rejects them.
enum class Dtype : uint8_t {
  BOOL,
  F4,
  F6_E2M3,
  F6_E3M2,
  U8,
  I8,
  F8_E5M2,
  F8_E4M3,
  F8_E8M0,
  I16,
  U16,
  F16,
  BF16,
  I32,
  U32,
  F32,
  C64,
  F64,
  I64,
  U64,
};
inline constexpr int kNumDtypes = 20;

const char* dtype_name(Dtype d);                           // "F32", "BF16", "BOOL", ...
std::optional<Dtype> dtype_from_name(std::string_view s);  // exact, case-sensitive
int dtype_bits(Dtype d);                                   // 4 (F4), 6 (F6_*), 8, 16, 32, 64
std::string known_dtype_names();                           // "BOOL F4 ... U64", for errors

// The reference reader's header limit (MAX_HEADER_SIZE): larger files are refused before parsing.
inline constexpr uint64_t kMaxHeaderSize = 100'000'000;
inline constexpr uint64_t kPrefixSize = 8;  // the u64 header length

// One tensor as the header describes it. begin/end are relative to the start of the data buffer.
struct TensorInfo {
  std::string name;
  Dtype dtype = Dtype::F32;
  std::vector<uint64_t> shape;
  uint64_t begin = 0;
  uint64_t end = 0;
  uint64_t nbytes() const { return end - begin; }
  uint64_t numel() const;  // product of shape (validated not to overflow by the parser)
};

struct Header {
  std::vector<TensorInfo> tensors;              // sorted by data offset: file order
  std::map<std::string, std::string> metadata;  // "__metadata__"
  uint64_t header_size = 0;                     // N, padding included
  uint64_t data_size = 0;                       // bytes of the data buffer (= the last tensor's end)
  uint64_t data_start() const { return kPrefixSize + header_size; }
  const TensorInfo* find(std::string_view name) const;  // nullptr when absent
};

// ---- parsing; every error is a tr::Error that starts with `source` (a path or "<memory>") ----

// Decodes the 8-byte length and checks it against kMaxHeaderSize and the file size.
uint64_t parse_header_length(const unsigned char* prefix, uint64_t file_size, const std::string& source);
// Parses and validates the N header bytes of a file that is `file_size` bytes long (prefix included).
Header parse_header(std::string_view json, uint64_t file_size, const std::string& source);
// Both steps on a whole file held in memory. The returned offsets index `bytes` safely:
// bytes + data_start() + t.begin .. + t.end lies inside [bytes, bytes + size).
Header parse(const void* bytes, size_t size, const std::string& source = "<memory>");
// Reads only the prefix and the header of a file (never the data) and validates them.
Header read_header(const std::string& path);

// An open file with a validated header; copies tensors' bytes out with positioned reads, each byte
// read once, never past what the header (checked against the file size) allows.
class Reader {
 public:
  explicit Reader(const std::string& path);
  ~Reader();
  Reader(const Reader&) = delete;
  Reader& operator=(const Reader&) = delete;

  const Header& header() const { return header_; }
  const std::string& path() const { return path_; }
  // Copies info.nbytes() bytes into dst; throws if the file shrank since it was opened.
  void read(const TensorInfo& info, void* dst) const;

 private:
  std::string path_;
  int fd_ = -1;
  Header header_;
};

// ---- writing ----

// A tensor to write: row-major little-endian bytes; nbytes must equal numel * width.
struct TensorData {
  std::string name;
  Dtype dtype = Dtype::F32;
  std::vector<uint64_t> shape;
  const void* data = nullptr;
  uint64_t nbytes = 0;
};

// The length prefix and the padded JSON header of a file holding `tensors` back to back in the given
// order ("__metadata__" first, then the tensors in that order). Checks names (unique, not
// "__metadata__") and that each nbytes matches its dtype and shape.
std::string serialize_header(const std::vector<TensorData>& tensors,
                             const std::map<std::string, std::string>& metadata);
// The whole file in memory (tests, small files).
std::string serialize(const std::vector<TensorData>& tensors, const std::map<std::string, std::string>& metadata);
// Writes the file (truncating); not fsynced: the checkpoint layer makes files durable.
void write_file(const std::string& path, const std::vector<TensorData>& tensors,
                const std::map<std::string, std::string>& metadata);

}  // namespace tr::io::safetensors
