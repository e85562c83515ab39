#include "train/stop_signal.h"
#include <csignal>

namespace tr::train {

namespace {

volatile std::sig_atomic_t g_signal = 0;
struct sigaction g_old_int, g_old_term;

void on_signal(int sig) {
  if (g_signal != 0) {  // the second signal: stop now, with the signal's default action
    std::signal(sig, SIG_DFL);
    std::raise(sig);
    return;
  }
  g_signal = sig;
}

}  // namespace

StopSignal::StopSignal() {
  g_signal = 0;
  struct sigaction sa = {};
  sa.sa_handler = on_signal;
  sigemptyset(&sa.sa_mask);
  sigaction(SIGINT, &sa, &g_old_int);
  sigaction(SIGTERM, &sa, &g_old_term);
}

StopSignal::~StopSignal() {
  sigaction(SIGINT, &g_old_int, nullptr);
  sigaction(SIGTERM, &g_old_term, nullptr);
}

int StopSignal::pending() const { return g_signal; }

}  // namespace tr::train
