#include "data/recordio.h"
#include <algorithm>
#include <charconv>
#include <cstring>
#include "core/error.h"
#include "core/little_endian.h"

namespace tr::data {

namespace {

void put_part(std::vector<uint8_t>& out, uint32_t cflag, const uint8_t* p, uint32_t n) {
  put_le32(out, kRecordIOMagic);
  put_le32(out, cflag << 29U | n);
  out.insert(out.end(), p, p + n);
}

}  // namespace

std::vector<uint8_t> read_record(const uint8_t* data, size_t size, uint64_t offset, const std::string& path, int* parts,
                                 uint64_t* end) {
  std::vector<uint8_t> out;
  uint64_t at = offset;
  for (int part = 0;; ++part) {
    TR_CHECK(at <= size && size - at >= 8, "RecordIO ", path, ": the record at byte ", offset,
             " runs past the end of the file (", size, " bytes): the file is cut short or the index is stale");
    TR_CHECK(le32(data + at) == kRecordIOMagic, "RecordIO ", path, ": no record magic at byte ", at,
             " (the record at byte ", offset,
             "): the index points into the middle of a record, or this is no .rec file");
    const uint32_t lrec = le32(data + at + 4), cflag = lrec >> 29U, len = lrec & ((1U << 29U) - 1U);
    TR_CHECK(part == 0 ? (cflag == 0 || cflag == 1) : (cflag == 2 || cflag == 3), "RecordIO ", path,
             ": record at byte ", offset, ": part ", part, " has continuation flag ", cflag);
    const uint64_t padded = (uint64_t(len) + 3U) / 4U * 4U;
    TR_CHECK(size - at - 8 >= padded, "RecordIO ", path, ": the record at byte ", offset, " needs ", len,
             " bytes past byte ", at + 8, ", the file ends at ", size, ": it is cut short");
    out.insert(out.end(), data + at + 8, data + at + 8 + len);
    at += 8 + padded;
    if (cflag == 0 || cflag == 3) {
      if (parts) *parts = part + 1;
      if (end) *end = at;
      return out;
    }
    put_le32(out, kRecordIOMagic);  // the word the writer split at
  }
}

std::vector<uint8_t> write_record(const std::vector<uint8_t>& payload) {
  TR_CHECK(payload.size() < (1U << 29U), "write_record: ", payload.size(), " bytes exceed RecordIO's 29-bit length");
  const uint32_t len = uint32_t(payload.size()), lower = len / 4U * 4U;
  std::vector<uint8_t> out;
  uint32_t from = 0;
  for (uint32_t i = 0; i < lower; i += 4)
    if (le32(payload.data() + i) == kRecordIOMagic) {
      put_part(out, from == 0 ? 1U : 2U, payload.data() + from, i - from);
      from = i + 4;
    }
  put_part(out, from != 0 ? 3U : 0U, payload.data() + from, len - from);
  out.resize((out.size() + 3U) / 4U * 4U, 0);
  return out;
}

RecordIOWriter::RecordIOWriter(std::string rec, std::string idx)
    : rec_path_(std::move(rec)), idx_path_(std::move(idx)) {
  rec_ = std::fopen(rec_path_.c_str(), "wb");
  idx_ = std::fopen(idx_path_.c_str(), "wb");
  if (!rec_ || !idx_) {
    if (rec_) std::fclose(rec_);
    if (idx_) std::fclose(idx_);
    throw Error(str("RecordIO: cannot write ", rec_path_, " and ", idx_path_));
  }
}

RecordIOWriter::~RecordIOWriter() {
  if (rec_) std::fclose(rec_);
  if (idx_) std::fclose(idx_);
}

void RecordIOWriter::write(uint64_t key, const std::vector<uint8_t>& payload) {
  const std::vector<uint8_t> r = write_record(payload);
  TR_CHECK(std::fwrite(r.data(), 1, r.size(), rec_) == r.size() &&
               std::fprintf(idx_, "%llu\t%llu\n", (unsigned long long)key, (unsigned long long)offset_) > 0,
           "RecordIO: cannot write ", rec_path_, " and ", idx_path_);
  offset_ += r.size();
}

void RecordIOWriter::close() {
  const bool ok = std::fclose(rec_) == 0;
  const bool ok_idx = std::fclose(idx_) == 0;
  rec_ = idx_ = nullptr;
  TR_CHECK(ok && ok_idx, "RecordIO: cannot write ", rec_path_, " and ", idx_path_);
}

std::vector<std::pair<uint64_t, uint64_t>> parse_record_index(const std::string& text, const std::string& path) {
  std::vector<std::pair<uint64_t, uint64_t>> r;
  size_t at = 0;
  for (int64_t line = 1; at < text.size(); ++line) {
    const size_t end = std::min(text.find('\n', at), text.size());
    std::string l = text.substr(at, end - at);
    at = end + 1;
    if (!l.empty() && l.back() == '\r') l.pop_back();
    if (l.empty()) continue;
    const size_t tab = l.find('\t');
    uint64_t key = 0, off = 0;
    bool ok = tab != std::string::npos;
    if (ok) {
      auto [p1, e1] = std::from_chars(l.data(), l.data() + tab, key);
      auto [p2, e2] = std::from_chars(l.data() + tab + 1, l.data() + l.size(), off);
      ok = e1 == std::errc() && p1 == l.data() + tab && e2 == std::errc() && p2 == l.data() + l.size();
    }
    TR_CHECK(ok, "RecordIO index ", path, ": line ", line, " is '", l, "', expected \"<key>\\t<byte offset>\"");
    r.emplace_back(key, off);
  }
  return r;
}

ImageRecord unpack_image_record(const std::vector<uint8_t>& payload, const std::string& where) {
  TR_CHECK(payload.size() >= 24, where, ": ", payload.size(), " bytes is shorter than MXNet's 24-byte IRHeader");
  ImageRecord r;
  const uint32_t flag = le32(payload.data());
  float label;
  std::memcpy(&label, payload.data() + 4, 4);
  std::memcpy(&r.id, payload.data() + 8, 8);
  std::memcpy(&r.id2, payload.data() + 16, 8);
  size_t at = 24;
  if (flag == 0) {
    r.labels = {label};
  } else {
    TR_CHECK(payload.size() - 24 >= size_t(flag) * 4, where, ": the IRHeader announces ", flag,
             " labels, the record holds ", (payload.size() - 24) / 4);
    r.labels.resize(flag);
    std::memcpy(r.labels.data(), payload.data() + 24, size_t(flag) * 4);
    at += size_t(flag) * 4;
  }
  r.image = payload.data() + at;
  r.image_size = payload.size() - at;
  return r;
}

std::vector<uint8_t> pack_image_record(float label, uint64_t id, const uint8_t* image, size_t n) {
  std::vector<uint8_t> out(24);
  std::memcpy(out.data() + 4, &label, 4);
  std::memcpy(out.data() + 8, &id, 8);
  out.insert(out.end(), image, image + n);
  return out;
}

}  // namespace tr::data
