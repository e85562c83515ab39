#include "io/run_lock.h"
#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>
#include <cerrno>
#include <cstring>
#include <ctime>
#include <filesystem>
#include "core/error.h"

namespace tr::io {

RunLock::RunLock(const std::string& run_dir) {
  std::filesystem::create_directories(run_dir);
  const std::string path = run_dir + "/.lock";
  fd_ = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  TR_CHECK(fd_ >= 0, "cannot open the run's lock file ", path, ": ", std::strerror(errno));
  if (::flock(fd_, LOCK_EX | LOCK_NB) != 0) {
    const int err = errno;
    char holder[512] = {0};
    const ssize_t n = ::pread(fd_, holder, sizeof holder - 1, 0);
    ::close(fd_);
    fd_ = -1;
    std::string who = n > 0 ? std::string(holder, size_t(n)) : std::string("another process");
    while (!who.empty() && (who.back() == '\n' || who.back() == ' ')) who.pop_back();
    TR_CHECK(err != EWOULDBLOCK, "run directory ", run_dir, " is in use by ", who,
             ": one run, one writer. Wait for it to finish (or stop it: it writes a checkpoint on SIGTERM), or give "
             "this run another [run] name");
    throw Error(str("cannot lock the run's lock file ", path, ": ", std::strerror(err)));
  }
  char host[256] = "?";
  ::gethostname(host, sizeof host - 1);
  char when[64] = "";
  const std::time_t now = std::time(nullptr);
  std::strftime(when, sizeof when, "%Y-%m-%d %H:%M:%S UTC", std::gmtime(&now));
  const std::string me = str("trainer pid ", ::getpid(), " on ", host, " (since ", when, ")\n");
  if (::ftruncate(fd_, 0) == 0 && ::pwrite(fd_, me.data(), me.size(), 0) == ssize_t(me.size())) return;
  // the lock holds without the note; the message of a refused run is then less specific
}

RunLock::~RunLock() {
  if (fd_ >= 0) ::close(fd_);  // closing releases the flock
}

}  // namespace tr::io
