// RecordIO: the .rec bytes read record after record from offset 0 (each as an image record, its
// image decoded when it is a PNG or JPEG); the input's text also parsed as an .idx file.
#include "data/image_decode.h"
#include "data/recordio.h"
#include "fuzz_util.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  uint64_t offset = 0;
  for (int k = 0; k < 64 && offset < size; ++k) {
    bool ok = false;
    tr::fuzz::expect_clean_error([&] {
      uint64_t next = 0;
      std::vector<uint8_t> payload = tr::data::read_record(data, size, offset, "fuzz.rec", nullptr, &next);
      if (next <= offset || next > size) __builtin_trap();  // the record lies inside the input
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
  tr::fuzz::expect_clean_error(
      [&] { (void)tr::data::parse_record_index(std::string(reinterpret_cast<const char*>(data), size), "fuzz.idx"); });
  return 0;
}
