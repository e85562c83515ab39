#include "io/async_writer.h"
#include <pthread.h>
#include <signal.h>

namespace tr::io {

AsyncWriter::~AsyncWriter() {
  {
    std::unique_lock<std::mutex> g(mu_);
    cv_.wait(g, [&] { return !job_ && !running_; });
    stop_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
}

void AsyncWriter::submit(std::function<void()> job) {
  std::unique_lock<std::mutex> g(mu_);
  cv_.wait(g, [&] { return !job_ && !running_; });
  if (done_) {
    std::exception_ptr e = done_->error;
    done_.reset();
    if (e) std::rethrow_exception(e);
  }
  if (!thread_.joinable()) {
    // The stop signals (SIGINT, SIGTERM) belong to the training thread: blocked in the writer, so
    // that the handler's flag is read where the loop reads it and no write of ours sees EINTR.
    // A new thread inherits the mask of its creator, set around its creation only.
    sigset_t all, old;
    sigfillset(&all);
    pthread_sigmask(SIG_BLOCK, &all, &old);
    thread_ = std::thread([this] { run(); });
    pthread_sigmask(SIG_SETMASK, &old, nullptr);
  }
  job_ = std::move(job);
  g.unlock();
  cv_.notify_all();
}

std::optional<AsyncWriter::Outcome> AsyncWriter::wait() {
  std::unique_lock<std::mutex> g(mu_);
  cv_.wait(g, [&] { return !job_ && !running_; });
  std::optional<Outcome> out = std::move(done_);
  done_.reset();
  return out;
}

std::optional<AsyncWriter::Outcome> AsyncWriter::poll() {
  std::lock_guard<std::mutex> g(mu_);
  if (job_ || running_) return std::nullopt;
  std::optional<Outcome> out = std::move(done_);
  done_.reset();
  return out;
}

bool AsyncWriter::pending() const {
  std::lock_guard<std::mutex> g(mu_);
  return job_ || running_ || done_;
}

void AsyncWriter::run() {
  std::unique_lock<std::mutex> g(mu_);
  for (;;) {
    cv_.wait(g, [&] { return stop_ || job_; });
    if (!job_) return;  // stop_, with nothing left to run
    std::function<void()> job = std::move(job_);
    job_ = nullptr;
    running_ = true;
    g.unlock();
    Outcome o;
    try {
      job();
    } catch (...) { o.error = std::current_exception(); }
    job = nullptr;  // what the job holds goes before its outcome is visible
    g.lock();
    running_ = false;
    done_ = std::move(o);
    cv_.notify_all();
  }
}

}  // namespace tr::io
