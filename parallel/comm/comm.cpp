#include "parallel/comm/comm.h"

#include <chrono>
#include <climits>
#include <cstdio>
#include <exception>
#include <thread>
#include <utility>
#include <vector>

#include "framework/error.h"

namespace shardlab::parallel {

void check_mpi(int code, const char* call) {
  if (code == MPI_SUCCESS) return;
  char text[MPI_MAX_ERROR_STRING];
  int length = 0;
  MPI_Error_string(code, text, &length);
  SL_ASSERT(false, std::string(call) + " failed: " + std::string(text, length));
}

int mpi_count(int64_t count) {
  SL_ASSERT(count >= 0 && count <= INT_MAX, "message of " + std::to_string(count) + " elements exceeds MPI's int count");
  return static_cast<int>(count);
}

namespace {
MPI_Comm g_job = MPI_COMM_NULL;  // what an internal error aborts, set by install_mpi_abort_handler
}

int job_rank_for_messages() {
  int initialized = 0;
  MPI_Initialized(&initialized);
  if (!initialized || g_job == MPI_COMM_NULL) return -1;
  int rank = -1;
  MPI_Comm_rank(g_job, &rank);
  return rank;
}

void install_mpi_abort_handler(MPI_Comm job) {
  g_job = job;
  set_abort_handler([](const char* message) {
    std::fprintf(stderr, "rank %d: %s\n", job_rank_for_messages(), message);
    std::fflush(stderr);
    // The whole job, not just one axis: an invariant broke, nothing is safe.
    MPI_Abort(g_job, 1);
  });
}

MpiRuntime::MpiRuntime(int& argc, char**& argv) {
  int provided = 0;
  MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
}

MpiRuntime::~MpiRuntime() { MPI_Finalize(); }

int run_mpi_main(MPI_Comm comm, const std::function<int()>& body) {
  install_mpi_abort_handler(comm);
  auto report_and_abort = [comm](const char* what, std::chrono::milliseconds grace) {
    int rank = -1;
    MPI_Comm_rank(comm, &rank);
    std::fprintf(stderr, "rank %d: error: %s\n", rank, what);
    std::fflush(stderr);
    std::this_thread::sleep_for(grace);
    // Other ranks may already sit in a collective; only an abort is sure to end them.
    MPI_Abort(comm, 1);
    return 1;
  };
  try {
    const int rc = body();
    // Every rank leaves together, agreeing on the exit code: a rank failing late (after
    // its last collective, writing a trace say) aborts the others waiting here, where
    // otherwise they could sit in MPI_Finalize, which an abort does not always end.
    int worst = rc;
    SL_MPI(MPI_Allreduce(&rc, &worst, 1, MPI_INT, MPI_MAX, comm));
    return worst;
  } catch (const UserError& e) {
    int size = 1;
    MPI_Comm_size(comm, &size);
    if (size == 1) {  // nobody to stop: a clear message and exit 1, no abort banner
      std::fprintf(stderr, "error: %s\n", e.what());
      return 1;
    }
    // Config is validated identically on every rank: the grace lets every rank print
    // the same message before the first abort tears the others down.
    return report_and_abort(e.what(), std::chrono::milliseconds(300));
  } catch (const std::exception& e) {
    return report_and_abort(e.what(), std::chrono::milliseconds(0));
  }
}

Comm::~Comm() {
  if (owned_ && comm_ != MPI_COMM_NULL) MPI_Comm_free(&comm_);
}

Comm::Comm(Comm&& other) noexcept
    : comm_(std::exchange(other.comm_, MPI_COMM_NULL)), owned_(std::exchange(other.owned_, false)) {}

Comm& Comm::operator=(Comm&& other) noexcept {
  if (this != &other) {
    if (owned_ && comm_ != MPI_COMM_NULL) MPI_Comm_free(&comm_);
    comm_ = std::exchange(other.comm_, MPI_COMM_NULL);
    owned_ = std::exchange(other.owned_, false);
  }
  return *this;
}

int Comm::rank() const {
  int r = 0;
  SL_MPI(MPI_Comm_rank(comm_, &r));
  return r;
}

int Comm::size() const {
  int s = 0;
  SL_MPI(MPI_Comm_size(comm_, &s));
  return s;
}

void check_same_configuration(MPI_Comm comm, const std::string& configuration) {
  uint64_t hash = 1469598103934665603ull;  // FNV-1a
  for (const unsigned char c : configuration) hash = (hash ^ c) * 1099511628211ull;
  int size = 1;
  SL_MPI(MPI_Comm_size(comm, &size));
  std::vector<uint64_t> hashes(static_cast<size_t>(size));
  SL_MPI(MPI_Allgather(&hash, 1, MPI_UINT64_T, hashes.data(), 1, MPI_UINT64_T, comm));
  std::string differ;
  for (int r = 1; r < size; ++r) {
    if (hashes[r] != hashes[0]) differ += (differ.empty() ? "" : ", ") + std::to_string(r);
  }
  if (!differ.empty()) {
    throw UserError("rank(s) " + differ + " started with a different configuration (flags) than rank 0; start every "
                    "rank with the same flags");
  }
}

}  // namespace shardlab::parallel
