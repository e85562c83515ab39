// One background thread that runs write jobs one at a time, for writes the caller must not wait
// for (asynchronous checkpoints, as torch.distributed.checkpoint.async_save): the caller takes
// what the job needs while it waits anyway, hands the job over, and goes on. At most one job is in
// flight: a new one waits for the one before. A job's failure is kept until the caller collects
// it (wait / poll), so that it is reported on the caller's thread, where errors are handled.
#pragma once
#include <condition_variable>
#include <exception>
#include <functional>
#include <mutex>
#include <optional>
#include <thread>

namespace tr::io {

class AsyncWriter {
 public:
  // How a job ended: error is null when it succeeded.
  struct Outcome {
    std::exception_ptr error;
  };

  AsyncWriter() = default;
  // Waits for the job in flight (an uncollected failure is dropped: the owner is going away, on
  // an error of its own or after collecting), then ends the thread.
  ~AsyncWriter();
  AsyncWriter(const AsyncWriter&) = delete;
  AsyncWriter& operator=(const AsyncWriter&) = delete;

  // Runs `job` on the background thread (started on first use) and returns at once. First waits
  // for the job before, if any; if that one failed and nobody collected its outcome, its error
  // is thrown here and `job` is not run. The job is destroyed as soon as it has run, so whatever
  // it holds (the copies it writes) is released before its outcome is reported.
  void submit(std::function<void()> job);
  // Blocks until the job in flight, if any, has ended; returns the outcome of the last job if
  // not yet collected (then it is), or nullopt when there is nothing to collect.
  std::optional<Outcome> wait();
  // wait() without blocking: nullopt while the job runs or when there is nothing to collect.
  std::optional<Outcome> poll();
  // A job was submitted whose outcome has not been collected yet.
  bool pending() const;

 private:
  void run();

  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::function<void()> job_;    // the job to run next (empty: none)
  bool running_ = false;         // the background thread is running a job
  std::optional<Outcome> done_;  // the last job's outcome, until collected
  bool stop_ = false;
  std::thread thread_;
};

}  // namespace tr::io
