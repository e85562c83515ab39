#include "data/gpt2_pretokenizer.h"
#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>
#include "core/error.h"

namespace tr::data {

struct GPT2PreTokenizer::Regex {
  pcre2_code* code = nullptr;
  ~Regex() { pcre2_code_free(code); }
};

namespace {

std::string pcre2_message(int rc) {
  PCRE2_UCHAR buf[256];
  return pcre2_get_error_message(rc, buf, sizeof buf) < 0 ? "error " + std::to_string(rc)
                                                          : std::string(reinterpret_cast<const char*>(buf));
}

struct MatchData {
  pcre2_match_data* md;
  explicit MatchData(const pcre2_code* code) : md(pcre2_match_data_create_from_pattern(code, nullptr)) {
    TR_CHECK(md, "GPT2PreTokenizer: out of memory for PCRE2's match data");
  }
  ~MatchData() { pcre2_match_data_free(md); }
};

}  // namespace

GPT2PreTokenizer::GPT2PreTokenizer() : re_(std::make_unique<Regex>()) {
  int err = 0;
  PCRE2_SIZE at = 0;
  // UCP: \p{..} and the classes by Unicode properties. MATCH_INVALID_UTF (implies UTF): a subject
  // that is not valid UTF-8 is searched, its bad bytes matching nothing, instead of refused.
  re_->code = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(kPattern), PCRE2_ZERO_TERMINATED,
                            PCRE2_UTF | PCRE2_UCP | PCRE2_MATCH_INVALID_UTF, &err, &at, nullptr);
  TR_CHECK(re_->code, "GPT2PreTokenizer: PCRE2 cannot compile GPT-2's pattern at offset ", at, ": ",
           pcre2_message(err));
  // pcre2_match runs the JIT code when it compiled; without a JIT it interprets the same pattern.
  jit_ = pcre2_jit_compile(re_->code, PCRE2_JIT_COMPLETE) == 0;
}

GPT2PreTokenizer::~GPT2PreTokenizer() = default;

void GPT2PreTokenizer::split(std::string_view text, const std::function<void(std::string_view)>& piece) const {
  MatchData m(re_->code);
  const auto* subject = reinterpret_cast<PCRE2_SPTR>(text.data());
  const PCRE2_SIZE* ov = pcre2_get_ovector_pointer(m.md);
  size_t pos = 0;
  while (pos < text.size()) {
    const int rc = pcre2_match(re_->code, subject, text.size(), pos, 0, m.md, nullptr);
    if (rc == PCRE2_ERROR_NOMATCH) break;
    TR_CHECK(rc > 0, "GPT2PreTokenizer: PCRE2 failed at byte ", pos, " of ", text.size(), ": ", pcre2_message(rc));
    // every alternative takes at least one character, so a match is never empty
    if (ov[0] > pos) piece(text.substr(pos, ov[0] - pos));  // bytes that are not UTF-8
    piece(text.substr(ov[0], ov[1] - ov[0]));
    pos = ov[1];
  }
  if (pos < text.size()) piece(text.substr(pos));
}

}  // namespace tr::data
