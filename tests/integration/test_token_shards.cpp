// Token shards through the real binary: gpt_char trains on fortunes packed by `trainer pack --tokens`
// and cut into shards of the three layouts (nanoGPT's raw uint16, llm.c's version 1 and 2) named by
// a glob; stopped and resumed it writes the uninterrupted run's metrics, inside an epoch and at its
// end; a changed shard set, a damaged shard and a token outside the vocabulary are one error each.
#include "integration/cli_harness.h"

namespace test_token_shards {

using namespace it;

namespace {

std::string le32(uint32_t v) {
  std::string s(4, '\0');
  for (int k = 0; k < 4; ++k) s[size_t(k)] = char(uint8_t(v >> (8 * k)));
  return s;
}

// `tokens` raw uint16 bytes (nanoGPT's layout) as a file of `layout`: "nanogpt", "llmc1" or "llmc2".
std::string shard_bytes(const std::string& tokens, const std::string& layout) {
  if (layout == "nanogpt") return tokens;
  std::string header = le32(20240520) + le32(layout == "llmc1" ? 1 : 2) + le32(uint32_t(tokens.size() / 2));
  header.resize(1024, '\0');
  if (layout == "llmc1") return header + tokens;
  std::string wide;
  for (size_t i = 0; i < tokens.size(); i += 2) wide += tokens.substr(i, 2) + std::string(2, '\0');
  return header + wide;
}

void write_shard(const fs::path& p, const std::string& tokens, const std::string& layout) {
  std::ofstream(p, std::ios::binary) << shard_bytes(tokens, layout);
}

}  // namespace

TEST_CASE("token shards: gpt_char trains on a glob of mixed shards and resumes exactly", "[integration][tokens]") {
  fs::path d = fresh_dir("token_shards");
  Result p = trainer(d, "pack --tokens data/fortunes --format nanogpt");
  INFO(p.out);
  REQUIRE(p.code == 0);
  const std::string train = read(d / "data/fortunes/train.bin");
  REQUIRE(train.size() > 2 * 3000);
  // 2100 tokens in four shards: 5 + 3 + 0 + 6 strided windows of 128 (the third is too short)
  fs::create_directories(d / "shards");
  const std::vector<std::pair<int, std::string>> cuts = {
      {700, "nanogpt"}, {500, "llmc1"}, {60, "llmc2"}, {840, "llmc2"}};
  size_t at = 0;
  for (size_t k = 0; k < cuts.size(); ++k) {
    write_shard(d / "shards" / ("train_00" + std::to_string(k) + ".bin"), train.substr(at, size_t(cuts[k].first) * 2),
                cuts[k].second);
    at += size_t(cuts[k].first) * 2;
  }
  std::string c = read(kRepo + "/configs/gpt_char_tokens.toml");
  c.replace(c.find("\"../models/gpt_char.toml\""), 25, "\"" + kRepo + "/models/gpt_char.toml\"");
  c.replace(c.find("train = \"data/fortunes/train.bin\""), 33, "train = \"shards/train_*.bin\"");
  c.replace(c.find("eval = \"data/fortunes/val.bin\""), 30, "eval = [\"data/fortunes/val.bin\"]");
  write(d / "tok.toml", c);
  // 14 windows, batches of 4: epochs of 4 steps (the last of 2 windows)
  const std::string args =
      "--set data.batch_size=4 --set train.steps=10 --set train.eval_every=5 "
      "--set train.eval_batches=1 --set data.eval_batch_size=4 --set train.log_every=1";
  for (int64_t stop : {6, 4}) {  // inside the second epoch; at the end of the first
    DYNAMIC_SECTION("stop at step " << stop) {
      fs::remove_all(d / "runs");
      check_exact_resume(d, "tok.toml", args, stop);
      const std::string straight = read(d / "runs/straight/metrics.jsonl");
      CHECK(metric_values(straight, "train", "loss").size() == 10);
      CHECK(metric_values(straight, "train", "epoch").back() == 2);
    }
  }
  // the shards in the run's line and its warning; state.json: the shard list and the next window
  Result a = trainer(d, "run tok.toml --set run.name=look --stop-at-step 6 " + args);
  REQUIRE(a.code == 0);
  CHECK_THAT(a.out,
             Contains("TokenDataset(4 shards 'shards/train_000.bin' .. 'train_003.bin' (1 nanogpt, 1 llmc v1, "
                      "2 llmc v2), 2100 tokens, block_size=128, 14 non-overlapping windows; 1 shard is shorter"));
  CHECK_THAT(a.out,
             Contains("warning: [data] train: 1 of 4 token files hold fewer than block_size + 1 = 129 tokens and "
                      "give no window: shards/train_002.bin (60 tokens)"));
  const std::string state = read(d / "runs/look/checkpoints/step_6/state.json");
  CHECK_THAT(state,
             Contains("\"token_shards\": [") && Contains("\"file\": \"train_003.bin\",\n        \"tokens\": 840"));
  std::smatch m;
  REQUIRE(std::regex_search(state, m,
                            std::regex("\"data_position\": \\{\\s*\"file\": \"train_00(\\d).bin\",\\s*"
                                       "\"offset\": (\\d+),\\s*\"shard\": (\\d),\\s*\"window\": (\\d+)")));
  CHECK(m[1] == m[3]);                      // the shard's index and its name agree
  CHECK(std::stoi(m[2].str()) % 128 == 0);  // a strided window's start
  CHECK(m[1] != "2");

  // the shards changed under the checkpoint: the resume is refused, naming what changed
  write_shard(d / "shards/train_004.bin", train.substr(0, 400), "nanogpt");
  Result added = trainer(d, "run tok.toml --set run.name=look --resume auto " + args);
  CHECK(added.code != 0);
  CHECK_THAT(added.out, Contains("cannot resume from") &&
                            Contains("the training token shards differ from the checkpoint's") &&
                            Contains("1 shard added (train_004.bin (200 tokens))"));
  fs::remove(d / "shards/train_004.bin");
  write_shard(d / "shards/train_003.bin", train.substr(at - 840 * 2, 800 * 2), "llmc2");
  Result resized = trainer(d, "run tok.toml --set run.name=look --resume auto " + args);
  CHECK(resized.code != 0);
  CHECK_THAT(resized.out, Contains("1 shard resized (train_003.bin: 840 tokens, now 800)"));

  // a damaged shard names itself
  std::string v1 = shard_bytes(train.substr(700 * 2, 500 * 2), "llmc1");
  std::ofstream(d / "shards/train_001.bin", std::ios::binary) << v1.substr(0, v1.size() - 3);
  Result cut = trainer(d, "run tok.toml --set run.name=cut " + args);
  CHECK(cut.code != 0);
  CHECK_THAT(cut.out, Contains("token file shards/train_001.bin: the header says 500 tokens") && Contains("cut short"));
  write_shard(d / "shards/train_001.bin", train.substr(700 * 2, 500 * 2), "llmc1");

  // a token outside the model's vocabulary of 256 stops the run when its window is read
  std::string bad = train.substr(at - 840 * 2, 840 * 2);
  bad[2 * 300 + 1] = 1;  // token 300 of train_003.bin: 256 + its byte
  write_shard(d / "shards/train_003.bin", bad, "llmc2");
  Result vocab = trainer(d, "run tok.toml --set run.name=vocab " + args);
  CHECK(vocab.code != 0);
  CHECK_THAT(vocab.out,
             Contains("token file shards/train_003.bin: token 300 is ") &&
                 Contains("outside the model's vocabulary of 256 (at byte " + std::to_string(1024 + 300 * 4)));
}

}  // namespace test_token_shards
