// Checkpoint directories: the crash-safe writer, verification, listing, cleanup and pruning.
#include "io/checkpoint_dir.h"
#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>
#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <set>
#include "core/error.h"
#include "io/checksum.h"
#include "io/safetensors_format.h"

namespace tr::io {

namespace fs = std::filesystem;
using json = nlohmann::json;

namespace {

const std::string kTmpPrefix = ".tmp-";

std::string pid_suffix() { return "-" + std::to_string(::getpid()); }

// Makes a file's data, or a directory's entries, durable. Renames are only as durable as the
// fsync of the directory holding them.
void fsync_path(const std::string& path, bool is_dir) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | (is_dir ? O_DIRECTORY : 0));
  TR_CHECK(fd >= 0, "checkpoint: cannot open '", path, "' to fsync it: ", std::strerror(errno));
  int rc = ::fsync(fd);
  int err = errno;
  ::close(fd);
  TR_CHECK(rc == 0, "checkpoint: fsync of '", path, "' failed: ", std::strerror(err));
}

void write_durable(const std::string& path, const std::string& content) {
  int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  TR_CHECK(fd >= 0, "checkpoint: cannot write '", path, "': ", std::strerror(errno));
  const char* p = content.data();
  size_t n = content.size();
  while (n > 0) {
    ssize_t r = ::write(fd, p, n);
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) {
      int err = errno;
      ::close(fd);
      throw Error(str("checkpoint: write to '", path, "' failed: ", std::strerror(err)));
    }
    p += r;
    n -= size_t(r);
  }
  int rc = ::fsync(fd);
  int err = errno;
  TR_CHECK(::close(fd) == 0 && rc == 0, "checkpoint: cannot finish '", path, "': ", std::strerror(rc ? err : errno));
}

// Reads a small file whole; `limit` guards against a bogus huge file.
std::string read_small(const std::string& path, uint64_t limit) {
  std::error_code ec;
  uint64_t size = fs::file_size(path, ec);
  TR_CHECK(!ec, "cannot read: ", ec.message());
  TR_CHECK(size <= limit, "is ", size, " bytes, more than the ", limit, " expected");
  std::string out(size_t(size), '\0');
  std::FILE* f = std::fopen(path.c_str(), "rb");
  TR_CHECK(f, "cannot open: ", std::strerror(errno));
  size_t got = std::fread(out.data(), 1, out.size(), f);
  std::fclose(f);
  TR_CHECK(got == out.size(), "short read (", got, " of ", size, " bytes)");
  return out;
}

void rename_or_throw(const std::string& from, const std::string& to) {
  TR_CHECK(::rename(from.c_str(), to.c_str()) == 0, "checkpoint: cannot rename '", from, "' to '", to,
           "': ", std::strerror(errno));
}

bool pid_alive(long pid) {
  if (pid <= 0) return false;  // kill(0 or -1, ...) would address a group, not a process
  return ::kill(pid_t(pid), 0) == 0 || errno == EPERM;
}

// The pid at the end of a temporary entry's name (".tmp-step_120-4242" -> 4242).
std::optional<long> temp_owner(const std::string& name) {
  auto dash = name.rfind('-');
  if (dash == std::string::npos || dash + 1 >= name.size()) return std::nullopt;
  long pid = 0;
  const char* b = name.data() + dash + 1;
  const char* e = name.data() + name.size();
  auto [p, ec] = std::from_chars(b, e, pid);
  if (ec != std::errc() || p != e) return std::nullopt;
  return pid;
}

// A file name a checkpoint may hold: one path component, no hidden or special names.
bool plain_file_name(const std::string& f) {
  return !f.empty() && f != "." && f != ".." && f.find('/') == std::string::npos && f.find('\0') == std::string::npos;
}

struct Expected {
  std::string crc32;
  uint64_t size = 0;
};

// {"crc32": "8 hex digits", "size": n}, or the reason it is not one.
std::optional<Expected> parse_expected(const json& e, std::string* why) {
  if (!e.is_object() || !e.contains("crc32") || !e.contains("size") || !e["crc32"].is_string() ||
      !e["size"].is_number_unsigned()) {
    *why = "expected {\"crc32\": \"<8 hex digits>\", \"size\": <bytes>}";
    return std::nullopt;
  }
  Expected x{e["crc32"].get<std::string>(), e["size"].get<uint64_t>()};
  if (x.crc32.size() != 8 || x.crc32.find_first_not_of("0123456789abcdef") != std::string::npos) {
    *why = str("crc32 \"", x.crc32, "\" is not 8 lowercase hex digits");
    return std::nullopt;
  }
  return x;
}

// The file's problem against what its listing expects, or nullopt when it matches.
std::optional<std::string> check_file(const std::string& path, const Expected& want) {
  std::error_code ec;
  auto st = fs::status(path, ec);
  if (ec || !fs::exists(st)) return std::string("missing");
  if (!fs::is_regular_file(st)) return std::string("not a regular file");
  uint64_t size = fs::file_size(path, ec);
  if (ec) return str("cannot stat: ", ec.message());
  if (size != want.size) return str("size is ", size, " bytes, expected ", want.size, " (truncated or rewritten)");
  FileChecksum c;
  try {
    c = checksum_file(path);
  } catch (const std::exception& e) { return std::string(e.what()); }
  if (c.size != want.size) return str("read ", c.size, " bytes, expected ", want.size);
  if (c.hex() != want.crc32) return str("crc32 is ", c.hex(), ", expected ", want.crc32, " (corrupted)");
  return std::nullopt;
}

// step_<N> directories under root, complete or not, by step then name.
std::vector<CheckpointInfo> step_dirs(const std::string& root, bool complete_only) {
  std::vector<CheckpointInfo> out;
  std::error_code ec;
  if (!fs::is_directory(root, ec)) return out;
  for (fs::directory_iterator it(root, ec), end; !ec && it != end; it.increment(ec)) {
    std::string name = it->path().filename().string();
    auto step = checkpoint_step(name);
    std::error_code ec2;
    if (!step || !it->is_directory(ec2)) continue;
    std::string path = (fs::path(root) / name).string();
    if (complete_only && !fs::is_regular_file(fs::path(path) / kCheckpointCompleteFile, ec2)) continue;
    out.push_back({*step, name, path});
  }
  TR_CHECK(!ec, "checkpoint: cannot list '", root, "': ", ec.message());
  std::sort(out.begin(), out.end(), [](const CheckpointInfo& a, const CheckpointInfo& b) {
    return a.step != b.step ? a.step < b.step : a.name < b.name;
  });
  return out;
}

// Moves a directory out of sight under a temporary name, then deletes it: a crash half-way through
// the deletion leaves a .tmp- entry for clean_temporaries, never a half-deleted step_<N>.
void remove_dir(const std::string& root, const std::string& path, const std::string& name) {
  std::string gone = (fs::path(root) / (kTmpPrefix + "removed-" + name + pid_suffix())).string();
  std::error_code ec;
  fs::remove_all(gone, ec);
  rename_or_throw(path, gone);
  fs::remove_all(gone, ec);
  TR_CHECK(!ec, "checkpoint: cannot delete '", gone, "': ", ec.message());
}

}  // namespace

std::string checkpoint_name(int64_t step) {
  TR_CHECK(step >= 0, "checkpoint: step must be non-negative, got ", step);
  return "step_" + std::to_string(step);
}

std::optional<int64_t> checkpoint_step(const std::string& name) {
  static const std::string prefix = "step_";
  if (name.size() <= prefix.size() || name.compare(0, prefix.size(), prefix) != 0) return std::nullopt;
  const char* b = name.data() + prefix.size();
  const char* e = name.data() + name.size();
  if (*b < '0' || *b > '9') return std::nullopt;  // from_chars would accept a sign
  int64_t step = 0;
  auto [p, ec] = std::from_chars(b, e, step);
  if (ec != std::errc() || p != e) return std::nullopt;
  return step;
}

// ---- CheckpointWriter ----

CheckpointWriter::CheckpointWriter(std::string root, std::string name)
    : root_(std::move(root)), name_(std::move(name)) {
  TR_CHECK(checkpoint_step(name_) || name_ == kFinalCheckpointName, "CheckpointWriter: checkpoint name '", name_,
           "' is not step_<N> (nor ", kFinalCheckpointName, ")");
  std::error_code ec;
  fs::create_directories(root_, ec);
  TR_CHECK(!ec, "checkpoint: cannot create '", root_, "': ", ec.message());
  tmp_ = (fs::path(root_) / (kTmpPrefix + name_ + pid_suffix())).string();
  // Same name and pid: a leftover of a dead process whose pid we now have, or of an earlier writer
  // of ours that failed; nobody can be writing it.
  fs::remove_all(tmp_, ec);
  TR_CHECK(fs::create_directory(tmp_, ec) && !ec, "checkpoint: cannot create '", tmp_, "': ", ec.message());
}

CheckpointWriter::~CheckpointWriter() {
  if (tmp_.empty()) return;
  std::error_code ec;
  fs::remove_all(tmp_, ec);  // best effort in a destructor; clean_temporaries catches the rest
}

std::string CheckpointWriter::path_for(const std::string& file) const {
  TR_CHECK(!committed_, "CheckpointWriter ", name_, ": already committed");
  TR_CHECK(plain_file_name(file), "CheckpointWriter ", name_, ": '", file, "' is not a plain file name");
  TR_CHECK(file != kCheckpointStateFile && file != kCheckpointCompleteFile, "CheckpointWriter ", name_, ": '", file,
           "' is written by commit()");
  return (fs::path(tmp_) / file).string();
}

std::string CheckpointWriter::commit(json state) {
  TR_CHECK(!committed_, "CheckpointWriter ", name_, ": already committed");
  if (state.is_null()) state = json::object();
  TR_CHECK(state.is_object(), "CheckpointWriter ", name_, ": state must be a JSON object, got ", state.type_name());

  // 1. every file: checksum, then fsync, so that COMPLETE never precedes the data it vouches for
  json files = json::object();
  std::error_code ec;
  for (fs::directory_iterator it(tmp_, ec), end; !ec && it != end; it.increment(ec)) {
    std::string file = it->path().filename().string();
    if (file == kCheckpointStateFile || file == kCheckpointCompleteFile) continue;  // ours; rewritten below
    std::error_code ec2;
    TR_CHECK(it->is_regular_file(ec2), "CheckpointWriter ", name_, ": '", it->path().string(),
             "' is not a regular file (a checkpoint holds plain files only)");
    FileChecksum c = checksum_file(it->path().string());
    fsync_path(it->path().string(), false);
    files[file] = {{"crc32", c.hex()}, {"size", c.size}};
  }
  TR_CHECK(!ec, "checkpoint: cannot list '", tmp_, "': ", ec.message());
  state["files"] = std::move(files);

  // 2. state.json, then COMPLETE (which vouches for state.json), then the directory's entries
  std::string text;
  try {
    text = state.dump(2) + "\n";
  } catch (const json::exception& e) {
    throw Error(str("CheckpointWriter ", name_, ": cannot encode state.json: ", e.what()));
  }
  write_durable((fs::path(tmp_) / kCheckpointStateFile).string(), text);
  json complete = {
      {kCheckpointStateFile, {{"crc32", crc32_hex(crc32_update(0, text.data(), text.size()))}, {"size", text.size()}}}};
  write_durable((fs::path(tmp_) / kCheckpointCompleteFile).string(), complete.dump() + "\n");
  fsync_path(tmp_, true);

  // 3. publish: rename into place (swap with an existing one), make the rename durable
  std::string final_dir = (fs::path(root_) / name_).string();
  if (fs::exists(final_dir, ec)) {
    TR_CHECK(fs::is_directory(final_dir, ec), "checkpoint: '", final_dir, "' exists and is not a directory");
    if (::renameat2(AT_FDCWD, tmp_.c_str(), AT_FDCWD, final_dir.c_str(), RENAME_EXCHANGE) == 0) {
      committed_ = true;  // tmp_ now holds the replaced checkpoint
    } else {
      TR_CHECK(errno == EINVAL || errno == ENOSYS || errno == EOPNOTSUPP, "checkpoint: cannot swap '", tmp_, "' with '",
               final_dir, "': ", std::strerror(errno));
      // No atomic exchange on this filesystem: for a moment there is no <name>; older ones remain.
      std::string old = (fs::path(root_) / (kTmpPrefix + "replaced-" + name_ + pid_suffix())).string();
      fs::remove_all(old, ec);
      rename_or_throw(final_dir, old);
      rename_or_throw(tmp_, final_dir);
      committed_ = true;
      tmp_ = old;
    }
  } else {
    rename_or_throw(tmp_, final_dir);
    committed_ = true;
    tmp_.clear();
  }
  fsync_path(root_, true);
  if (!tmp_.empty()) {
    fs::remove_all(tmp_, ec);  // the replaced checkpoint; a leftover is a .tmp- entry
    tmp_.clear();
  }

  // 4. latest, replaced atomically (a step's checkpoint only: `latest` is where a resume starts)
  if (!checkpoint_step(name_)) return final_dir;
  std::string latest_tmp = (fs::path(root_) / (kTmpPrefix + "latest" + pid_suffix())).string();
  write_durable(latest_tmp, name_ + "\n");
  rename_or_throw(latest_tmp, (fs::path(root_) / kCheckpointLatestFile).string());
  fsync_path(root_, true);
  return final_dir;
}

// ---- verification ----

std::string VerifyReport::message() const { return ok ? std::string("ok") : file + ": " + problem; }

VerifyReport verify_checkpoint(const std::string& dir) {
  VerifyReport r;
  r.dir = dir;
  auto fail = [&](const std::string& file, const std::string& problem) {
    r.ok = false;
    r.file = file;
    r.problem = problem;
    r.state = json();
    return r;
  };
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) return fail(dir, "not a directory");

  // COMPLETE: written last, so its absence means the writer never finished
  const std::string complete_path = (fs::path(dir) / kCheckpointCompleteFile).string();
  if (!fs::exists(complete_path, ec))
    return fail(complete_path,
                "missing: the checkpoint was never completed (interrupted writer) or the marker was deleted");
  json complete;
  try {
    complete = json::parse(read_small(complete_path, 1 << 16));
  } catch (const std::exception& e) { return fail(complete_path, str("unreadable: ", e.what())); }
  std::string why;
  if (!complete.is_object() || !complete.contains(kCheckpointStateFile))
    return fail(complete_path, "does not describe state.json");
  auto want_state = parse_expected(complete[kCheckpointStateFile], &why);
  if (!want_state) return fail(complete_path, str("state.json entry: ", why));

  // state.json: checked against COMPLETE, then parsed; it lists every other file
  const std::string state_path = (fs::path(dir) / kCheckpointStateFile).string();
  if (auto bad = check_file(state_path, *want_state)) return fail(state_path, *bad);
  json state;
  try {
    state = json::parse(read_small(state_path, want_state->size));
  } catch (const std::exception& e) { return fail(state_path, str("unreadable: ", e.what())); }
  if (!state.is_object()) return fail(state_path, str("is a JSON ", state.type_name(), ", expected an object"));
  if (!state.contains("files") || !state["files"].is_object()) return fail(state_path, "has no \"files\" object");

  for (auto& [file, entry] : state["files"].items()) {
    if (!plain_file_name(file) || file == kCheckpointStateFile || file == kCheckpointCompleteFile)
      return fail(state_path, str("lists an invalid file name \"", file, "\""));
    auto want = parse_expected(entry, &why);
    if (!want) return fail(state_path, str("entry for \"", file, "\": ", why));
    const std::string path = (fs::path(dir) / file).string();
    if (auto bad = check_file(path, *want)) return fail(path, *bad);
    if (file.size() > 12 && file.compare(file.size() - 12, 12, ".safetensors") == 0) {
      try {
        safetensors::read_header(path);
      } catch (const std::exception& e) {
        std::string msg = e.what();
        if (msg.compare(0, path.size() + 2, path + ": ") == 0) msg = msg.substr(path.size() + 2);
        return fail(path, msg);
      }
    }
  }
  r.ok = true;
  r.state = std::move(state);
  return r;
}

json load_checkpoint_state(const std::string& dir) {
  VerifyReport r = verify_checkpoint(dir);
  TR_CHECK(r.ok, "checkpoint ", dir, " is not usable: ", r.message());
  return std::move(r.state);
}

// ---- listing ----

std::vector<CheckpointInfo> list_checkpoints(const std::string& root) { return step_dirs(root, true); }

std::optional<std::string> read_latest(const std::string& root) {
  std::string text;
  try {
    text = read_small((fs::path(root) / kCheckpointLatestFile).string(), 4096);
  } catch (const std::exception&) { return std::nullopt; }
  auto b = text.find_first_not_of(" \t\r\n");
  auto e = text.find_last_not_of(" \t\r\n");
  if (b == std::string::npos) return std::nullopt;
  std::string name = text.substr(b, e - b + 1);
  if (!checkpoint_step(name)) return std::nullopt;
  return name;
}

std::optional<std::string> newest_valid_checkpoint(const std::string& root, std::vector<std::string>* warnings) {
  // Every step_<N> directory, complete or not: our writer never shows an incomplete one, so a
  // missing COMPLETE is damage worth a warning, not a directory to skip silently.
  auto dirs = step_dirs(root, false);
  for (auto it = dirs.rbegin(); it != dirs.rend(); ++it) {
    VerifyReport r = verify_checkpoint(it->path);
    if (r.ok) return it->path;
    if (warnings)
      warnings->push_back(
          str("checkpoint ", it->path, " is not usable (", r.message(), "); falling back to an older one"));
  }
  return std::nullopt;
}

// ---- cleanup ----

size_t clean_temporaries(const std::string& root) {
  std::vector<std::string> stale;
  std::error_code ec;
  if (!fs::is_directory(root, ec)) return 0;
  for (fs::directory_iterator it(root, ec), end; !ec && it != end; it.increment(ec)) {
    std::string name = it->path().filename().string();
    if (name.compare(0, kTmpPrefix.size(), kTmpPrefix) != 0) continue;
    auto pid = temp_owner(name);
    if (pid && pid_alive(*pid)) continue;
    stale.push_back(it->path().string());
  }
  TR_CHECK(!ec, "checkpoint: cannot list '", root, "': ", ec.message());
  for (const auto& p : stale) {
    fs::remove_all(p, ec);
    TR_CHECK(!ec, "checkpoint: cannot remove '", p, "': ", ec.message());
  }
  return stale.size();
}

size_t prune(const std::string& root, int keep_last, const std::optional<std::string>& keep_also) {
  TR_CHECK(keep_last >= 0, "checkpoint: keep_last must be >= 0 (0 keeps all), got ", keep_last);
  if (keep_last == 0) return 0;
  auto cps = list_checkpoints(root);
  std::set<std::string> keep;
  for (size_t i = cps.size() > size_t(keep_last) ? cps.size() - size_t(keep_last) : 0; i < cps.size(); ++i)
    keep.insert(cps[i].name);
  if (keep_also) {
    fs::path p(*keep_also);
    if (p.filename().empty()) p = p.parent_path();  // "runs/x/checkpoints/step_80/"
    keep.insert(p.filename().string());
  }
  if (auto latest = read_latest(root)) keep.insert(*latest);
  size_t removed = 0;
  for (const auto& cp : cps) {
    if (keep.count(cp.name)) continue;
    remove_dir(root, cp.path, cp.name);
    ++removed;
  }
  if (removed) fsync_path(root, true);
  return removed;
}

}  // namespace tr::io
