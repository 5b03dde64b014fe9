#include "parallel/runtime/preemption.h"

#include <atomic>
#include <csignal>
#include <cstdio>

#include "framework/error.h"

namespace shardlab::runtime {
namespace {

constexpr int kSignals[] = {SIGTERM, SIGINT, SIGUSR1};
// Lock-free, so the handler may store to it (async-signal-safe).
std::atomic<int> g_received{0};
static_assert(std::atomic<int>::is_always_lock_free);
struct sigaction g_previous[3];
bool g_installed = false;

void on_signal(int signal) {
  int none = 0;
  g_received.compare_exchange_strong(none, signal);
  // A second signal is not asked twice: the default action (the process ends) from now on.
  // sigaction is async-signal-safe.
  struct sigaction fallback {};
  fallback.sa_handler = SIG_DFL;
  sigemptyset(&fallback.sa_mask);
  for (const int s : kSignals) sigaction(s, &fallback, nullptr);
}

}  // namespace

PreemptionSignals::PreemptionSignals() {
  SL_ASSERT(!g_installed, "PreemptionSignals installed twice");
  g_installed = true;
  g_received = 0;
  struct sigaction action {};
  action.sa_handler = on_signal;
  sigemptyset(&action.sa_mask);
  action.sa_flags = SA_RESTART;  // a checkpoint write in progress carries on undisturbed
  for (int i = 0; i < 3; ++i) sigaction(kSignals[i], &action, &g_previous[i]);
}

PreemptionSignals::~PreemptionSignals() {
  for (int i = 0; i < 3; ++i) sigaction(kSignals[i], &g_previous[i], nullptr);
  g_installed = false;
}

int PreemptionSignals::received() const { return g_received.load(); }

const char* signal_name(int signal) {
  switch (signal) {
    case SIGTERM: return "SIGTERM";
    case SIGINT: return "SIGINT";
    case SIGUSR1: return "SIGUSR1";
    default: return "a signal";
  }
}

}  // namespace shardlab::runtime
