#include "parallel/comm/comm.h"

#include <chrono>
#include <climits>
#include <cstdio>
#include <cstdlib>
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

int ranks_sharing_node(MPI_Comm comm) {
  MPI_Comm node = MPI_COMM_NULL;
  SL_MPI(MPI_Comm_split_type(comm, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &node));
  const Comm owned = Comm::owned(node);
  return owned.size();
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
  // Started without a launcher (no mpirun or PMIx variables): one process with no peers.
  // OpenMPI would fork a daemon (orted) for it and probe the network transports, 0.4 s of
  // start-up on every single-process run; an isolated singleton with the plain
  // point-to-point layer starts in 0.06 s. Isolated singletons all take the same job name,
  // so two started at once would share one session directory under /tmp, and one's exit
  // deletes it while the other creates it (MPI_Init then fails, about 1 start in 250 with
  // 16 at once); a process with no peers needs no session directory, so none is made.
  // Settings the user made win (overwrite = 0).
  if (!std::getenv("OMPI_COMM_WORLD_SIZE") && !std::getenv("PMIX_RANK") && !std::getenv("PMI_RANK")) {
    setenv("OMPI_MCA_ess_singleton_isolated", "1", 0);
    setenv("OMPI_MCA_pml", "ob1", 0);
    setenv("OMPI_MCA_orte_create_session_dirs", "0", 0);
  }
  int provided = 0;
  MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
}

MpiRuntime::~MpiRuntime() { MPI_Finalize(); }

namespace {

// A rank whose body threw a UserError waits here, up to `grace`, for the others on
// `errors` (a communicator no other code uses). True when every rank arrived: each failed
// the same validation of the same configuration, so the job can end with exit 1 and one
// message instead of an abort; false when some rank is elsewhere (in a collective, say)
// and only an abort will end it.
bool every_rank_failed(MPI_Comm errors, std::chrono::milliseconds grace) {
  MPI_Request request = MPI_REQUEST_NULL;
  SL_MPI(MPI_Ibarrier(errors, &request));
  const auto deadline = std::chrono::steady_clock::now() + grace;
  for (;;) {
    int done = 0;
    SL_MPI(MPI_Test(&request, &done, MPI_STATUS_IGNORE));
    if (done) return true;
    if (std::chrono::steady_clock::now() > deadline) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
}

// Prints an error every rank reached: rank 0's message once as "error: ...", and
// "rank R: error: ..." from any rank whose message differs from rank 0's.
void print_agreed_error(MPI_Comm errors, const std::string& what) {
  int rank = 0;
  SL_MPI(MPI_Comm_rank(errors, &rank));
  int length = rank == 0 ? mpi_count(static_cast<int64_t>(what.size())) : 0;
  SL_MPI(MPI_Bcast(&length, 1, MPI_INT, 0, errors));
  std::string first = rank == 0 ? what : std::string(static_cast<size_t>(length), '\0');
  SL_MPI(MPI_Bcast(first.data(), length, MPI_CHAR, 0, errors));
  if (rank == 0) {
    std::fprintf(stderr, "error: %s\n", what.c_str());
  } else if (what != first) {
    std::fprintf(stderr, "rank %d: error: %s\n", rank, what.c_str());
  }
  std::fflush(stderr);
}

}  // namespace

int run_mpi_main(MPI_Comm comm, const std::function<int()>& body) {
  install_mpi_abort_handler(comm);
  MPI_Comm errors = MPI_COMM_NULL;
  SL_MPI(MPI_Comm_dup(comm, &errors));
  const Comm errors_owner = Comm::owned(errors);
  auto report_and_abort = [comm](const char* what) {
    int rank = -1;
    MPI_Comm_rank(comm, &rank);
    std::fprintf(stderr, "rank %d: error: %s\n", rank, what);
    std::fflush(stderr);
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
    // Every rank validates the same configuration, so a user error normally reaches all
    // of them within moments: they agree, print it once and exit 1 with MPI finalised --
    // no abort, no OpenMPI banner beyond mpirun's own non-zero-exit note (-q hides it).
    if (every_rank_failed(errors, std::chrono::seconds(3))) {
      print_agreed_error(errors, e.what());
      return 1;
    }
    return report_and_abort(e.what());
  } catch (const std::exception& e) {
    return report_and_abort(e.what());
  }
}

void raise_agreed_error(MPI_Comm comm, const std::string& error) {
  int rank = 0, size = 1;
  SL_MPI(MPI_Comm_rank(comm, &rank));
  SL_MPI(MPI_Comm_size(comm, &size));
  const int mine = error.empty() ? size : rank;
  int first = size;
  SL_MPI(MPI_Allreduce(&mine, &first, 1, MPI_INT, MPI_MIN, comm));
  if (first == size) return;
  int length = rank == first ? mpi_count(static_cast<int64_t>(error.size())) : 0;
  SL_MPI(MPI_Bcast(&length, 1, MPI_INT, first, comm));
  std::string message = rank == first ? error : std::string(static_cast<size_t>(length), '\0');
  SL_MPI(MPI_Bcast(message.data(), length, MPI_CHAR, first, comm));
  throw UserError(message);
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
