// The protocol-buffers wire format, the part TensorBoard's event files need: a message is a string
// of fields, each a key (field number << 3 | wire type) then a varint, a little-endian 64- or
// 32-bit value, or a length-prefixed byte string (strings, bytes, nested messages, packed repeated
// numbers). Written by hand rather than through libprotobuf and protoc: six small messages of
// TensorFlow's event.proto / summary.proto, encoded here and checked against TensorBoard's own
// reader (tests/fixtures/tensorboard/check_events.py).
#pragma once
#include <cstdint>
#include <cstring>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace tr::io::pb {

enum WireType : uint32_t { kVarint = 0, kFixed64 = 1, kBytes = 2, kFixed32 = 5 };

// Appends fields to one message's bytes.
class Writer {
 public:
  Writer& varint(uint32_t field, uint64_t v) {
    key(field, kVarint);
    put_varint(v);
    return *this;
  }
  Writer& fixed64(uint32_t field, double v) {
    key(field, kFixed64);
    put_le(&v, 8);
    return *this;
  }
  Writer& fixed32(uint32_t field, float v) {
    key(field, kFixed32);
    put_le(&v, 4);
    return *this;
  }
  // a string, bytes, or an encoded nested message
  Writer& bytes(uint32_t field, std::string_view b) {
    key(field, kBytes);
    put_varint(b.size());
    out_.append(b);
    return *this;
  }
  Writer& message(uint32_t field, const Writer& m) { return bytes(field, m.str()); }
  // a packed repeated double
  Writer& packed_doubles(uint32_t field, const std::vector<double>& v) {
    key(field, kBytes);
    put_varint(v.size() * 8);
    for (double d : v) put_le(&d, 8);
    return *this;
  }
  const std::string& str() const { return out_; }

 private:
  void key(uint32_t field, WireType t) { put_varint(uint64_t(field) << 3 | t); }
  void put_varint(uint64_t v) {
    while (v >= 0x80) {
      out_.push_back(char((v & 0x7f) | 0x80));
      v >>= 7;
    }
    out_.push_back(char(v));
  }
  // x86 and the other targets are little-endian, the wire's order
  void put_le(const void* p, size_t n) { out_.append(static_cast<const char*>(p), n); }
  std::string out_;
};

// One field of a message as read back: its number, wire type, and value (varint / fixed bits in
// `number`, the bytes of a length-delimited field in `bytes`).
struct Field {
  uint32_t field = 0;
  WireType type = kVarint;
  uint64_t number = 0;
  std::string_view bytes;
};

// Reads the fields of one message in order; next() is empty at the end or on malformed input.
class Reader {
 public:
  explicit Reader(std::string_view msg) : p_(msg) {}
  std::optional<Field> next() {
    if (p_.empty()) return std::nullopt;
    auto k = varint();
    if (!k) return std::nullopt;
    Field f;
    f.field = uint32_t(*k >> 3);
    f.type = WireType(*k & 7);
    switch (f.type) {
      case kVarint: {
        auto v = varint();
        if (!v) return std::nullopt;
        f.number = *v;
        return f;
      }
      case kFixed64:
      case kFixed32: {
        const size_t n = f.type == kFixed64 ? 8 : 4;
        if (p_.size() < n) return std::nullopt;
        std::memcpy(&f.number, p_.data(), n);
        p_.remove_prefix(n);
        return f;
      }
      case kBytes: {
        auto n = varint();
        if (!n || *n > p_.size()) return std::nullopt;
        f.bytes = p_.substr(0, size_t(*n));
        p_.remove_prefix(size_t(*n));
        return f;
      }
      default: return std::nullopt;
    }
  }

 private:
  std::optional<uint64_t> varint() {
    uint64_t v = 0;
    for (int shift = 0; shift < 64 && !p_.empty(); shift += 7) {
      const uint8_t b = uint8_t(p_.front());
      p_.remove_prefix(1);
      v |= uint64_t(b & 0x7f) << shift;
      if (!(b & 0x80)) return v;
    }
    return std::nullopt;
  }
  std::string_view p_;
};

}  // namespace tr::io::pb
