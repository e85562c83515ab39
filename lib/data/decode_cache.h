// DecodeCache: decoded copies of compressed data files (Fashion-MNIST's .gz IDX files), so a run
// maps the decoded bytes instead of decompressing them again. One file per source, named after the
// source's path, in a directory ($TRAINER_CACHE_DIR, else $XDG_CACHE_HOME/trainer/datasets, else
// ~/.cache/trainer/datasets). An entry records its source's size, mtime and last 8 bytes (a gzip
// file's CRC32 and length) and the CRC32 of its own data; it is used only when all of them match,
// so it is never stale: a changed source or a damaged entry is reported and rebuilt, never used.
#pragma once
#include <memory>
#include <optional>
#include <string>
#include <vector>
#include "data/file_bytes.h"

namespace tr::data {

class DecodeCache {
 public:
  // The default directory (see above); "" when neither variable nor HOME is set.
  static std::string default_dir();
  // trainer's cache directory, where other caches (train/mfu.h's peaks.json) live too:
  // $TRAINER_CACHE_DIR, else $XDG_CACHE_HOME/trainer, else ~/.cache/trainer; "" without any.
  static std::string cache_root();

  explicit DecodeCache(std::string dir) : dir_(std::move(dir)) {}
  const std::string& dir() const { return dir_; }

  // The cached decoded bytes of `source`, checked against the source and their own CRC32. None
  // when there is no entry, or the entry is stale or damaged (a note says which; the caller
  // decodes the source and stores the result, which replaces the entry).
  std::optional<FileBytes> find(const std::string& source);
  // A new entry being written: `size` bytes of a mapped temporary file that the decoder fills in
  // place (no second copy of the data), then commit() checksums it and renames it into place, so
  // readers never see half an entry. Dropped uncommitted, the temporary file is removed.
  class Entry {
   public:
    ~Entry();
    Entry(const Entry&) = delete;
    Entry& operator=(const Entry&) = delete;
    // The data area, with the mapping as owner (valid after commit, and after the Entry is gone).
    const FileBytes& bytes() const { return data_; }
    void commit();

   private:
    friend class DecodeCache;
    Entry() = default;
    DecodeCache* cache_ = nullptr;
    std::string source_, path_, tmp_;
    FileBytes file_, data_;  // the whole mapped file; its data area
    bool committed_ = false;
  };
  // An entry for `source` (whose bytes as read are `source_bytes`: the entry records their size,
  // mtime and tail, not the file's now, so a source replaced meanwhile leaves a stale entry) of
  // `size` decoded bytes. Null, with a note, when the directory cannot take it.
  std::unique_ptr<Entry> begin_store(const std::string& source, const FileBytes& source_bytes, size_t size);
  // begin_store, a copy of `decoded`, commit.
  void store(const std::string& source, const FileBytes& source_bytes, const FileBytes& decoded);
  // The entry's file for `source`.
  std::string entry_path(const std::string& source) const;

  // What happened that a user should know (a stale or damaged entry rebuilt, a cache not written).
  const std::vector<std::string>& notes() const { return notes_; }

 private:
  std::string dir_;
  std::vector<std::string> notes_;
};

}  // namespace tr::data
