// MXNet's RecordIO (dmlc-core recordio.h, mxnet/recordio.py): a .rec file of records and its .idx
// of "key\toffset" lines. A record on disk: uint32 magic 0xced7230a, uint32 lrec (the top 3 bits a
// continuation flag, the low 29 the length), the bytes, zero padding to 4. A payload holding the
// magic at a 4-aligned offset is split there into parts (flag 1 first, 2 middle, 3 last; 0 whole),
// the magic word dropped, and put back by the reader. An image record's payload is MXNet's IRHeader
// (uint32 flag, float label, uint64 id, id2; flag > 0: that many float labels follow) and the image.
// The format layer over bytes alone (it also builds into the sanitizer test binary).
#pragma once
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

namespace tr::data {

inline constexpr uint32_t kRecordIOMagic = 0xced7230a;

// The payload of the record at `offset` of a .rec file's bytes (parts joined; *parts gets how
// many, *end the offset just past its last part: the next record's); errors name `path`.
std::vector<uint8_t> read_record(const uint8_t* data, size_t size, uint64_t offset, const std::string& path,
                                 int* parts = nullptr, uint64_t* end = nullptr);
// The bytes of one record as dmlc's RecordIOWriter writes them (split where the magic appears).
std::vector<uint8_t> write_record(const std::vector<uint8_t>& payload);

// Writes records to a .rec file and their "key\toffset" lines to its .idx, as MXNet's
// MXIndexedRecordIO does; errors name the files. close() reports a failed flush.
class RecordIOWriter {
 public:
  RecordIOWriter(std::string rec, std::string idx);
  ~RecordIOWriter();
  RecordIOWriter(const RecordIOWriter&) = delete;
  RecordIOWriter& operator=(const RecordIOWriter&) = delete;
  void write(uint64_t key, const std::vector<uint8_t>& payload);
  void close();

 private:
  std::string rec_path_, idx_path_;
  std::FILE* rec_ = nullptr;
  std::FILE* idx_ = nullptr;
  uint64_t offset_ = 0;
};

// An .idx file's "key\toffset" lines, in file order; errors name `path` and the line.
std::vector<std::pair<uint64_t, uint64_t>> parse_record_index(const std::string& text, const std::string& path);

struct ImageRecord {
  std::vector<float> labels;  // one (flag 0: IRHeader's label) or flag many
  uint64_t id = 0, id2 = 0;
  const uint8_t* image = nullptr;  // into the payload
  size_t image_size = 0;
};
// MXNet's unpack: the IRHeader and labels, then the image bytes.
ImageRecord unpack_image_record(const std::vector<uint8_t>& payload, const std::string& where);
// MXNet's pack(IRHeader(0, label, id, 0), image).
std::vector<uint8_t> pack_image_record(float label, uint64_t id, const uint8_t* image, size_t n);

}  // namespace tr::data
