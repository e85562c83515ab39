// RecordIO: the .rec bytes read record after record from offset 0 (each as an image record, its
// image decoded when it is a PNG or JPEG); the input's text also parsed as an .idx file.
#include <cstring>
#include "data/image_decode.h"
#include "data/recordio.h"
#include "fuzz_util.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  uint64_t offset = 0;
  for (int k = 0; k < 64 && offset < size; ++k) {
    bool ok = false;
    tr::fuzz::expect_clean_error([&] {
      int parts = 0;
      std::vector<uint8_t> payload = tr::data::read_record(data, size, offset, "fuzz.rec", &parts);
      // the next record: past this one's parts (each 8 bytes of header and the padded bytes)
      uint64_t next = offset;
      for (int p = 0; p < parts; ++p) {
        if (next + 8 > size) __builtin_trap();  // read_record accepted a part past the end
        uint32_t lrec;
        std::memcpy(&lrec, data + next + 4, 4);
        next += 8 + ((uint64_t(lrec & ((1u << 29) - 1)) + 3) / 4) * 4;
      }
      if (next <= offset) __builtin_trap();
      offset = next;
      ok = true;
      tr::data::ImageRecord r = tr::data::unpack_image_record(payload, "fuzz.rec record");
      if (r.image < payload.data() || r.image + r.image_size > payload.data() + payload.size()) __builtin_trap();
      if (tr::data::is_encoded_image(r.image, r.image_size))
        (void)tr::data::decode_image(r.image, r.image_size, 1, "fuzz.rec image");
    });
    if (!ok) break;
  }
  // the writer's framing of the input as a payload reads back as the input
  std::vector<uint8_t> payload(data, data + size);
  std::vector<uint8_t> rec = tr::data::write_record(payload);
  if (tr::data::read_record(rec.data(), rec.size(), 0, "fuzz.rec") != payload) __builtin_trap();
  tr::fuzz::expect_clean_error([&] {
    (void)tr::data::parse_record_index(std::string(reinterpret_cast<const char*>(data), size), "fuzz.idx");
  });
  return 0;
}
