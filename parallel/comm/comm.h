// MPI plumbing: error checks, an owning communicator handle, process start-up and the
// job-wide failure policy. The only file pair besides the collectives that calls MPI
// directly; everything above it talks to a Mesh.
//
// Failure policy (docs/reliability.md): a rank that fails must take the whole job down, or the
// others wait in their next collective forever. `run_mpi_main` catches any exception,
// prints "rank R: error: ..." and calls MPI_Abort on the job's communicator; SL_ASSERT
// failures do the same through the abort handler it installs. A user error that every
// rank reaches ends the job without an abort: one message, exit 1. A program's main
// names the job (the world communicator); library code only ever receives it.
//
//   int main(int argc, char** argv) {
//     MpiRuntime mpi(argc, argv);
//     return run_mpi_main(job, [&] {          // job: the world communicator
//       Mesh mesh(job, "data=2,tensor=2");
//       ...
//       return 0;
//     });
//   }
#pragma once

#include <mpi.h>

#include <cstdint>
#include <functional>
#include <string>

namespace shardlab::parallel {

// Aborts the job (via the SL_ASSERT path) when an MPI call returns an error code.
void check_mpi(int code, const char* call);
#define SL_MPI(call) ::shardlab::parallel::check_mpi((call), #call)

// An element count as MPI's int (asserts that it fits).
int mpi_count(int64_t count);

// Initialises MPI (MPI_THREAD_MULTIPLE: the main thread communicates; each mesh's watchdog
// thread answers the other ranks' watchdogs on a communicator of its own, and aborts the
// job on a hang -- watchdog.h) and finalises it on destruction.
class MpiRuntime {
 public:
  MpiRuntime(int& argc, char**& argv);
  ~MpiRuntime();
  MpiRuntime(const MpiRuntime&) = delete;
  MpiRuntime& operator=(const MpiRuntime&) = delete;
};

// Makes SL_ASSERT failures print the rank in `job` and MPI_Abort `job`. run_mpi_main
// calls it; test mains that run doctest themselves call it too.
void install_mpi_abort_handler(MPI_Comm job);

// Installs the abort handler for `comm`, then runs `body`, and returns the largest of the
// ranks' exit codes. A UserError that every rank of `comm` throws within 3 s of the first
// (a bad configuration, validated alike everywhere) prints "error: <what>" once and
// returns 1 on every rank, with no abort; any other exception, or a UserError some rank
// does not share, prints "rank R: error: <what>" and aborts every rank with exit code 1.
int run_mpi_main(MPI_Comm comm, const std::function<int()>& body);

// Collective over `comm`, after work that may fail on some ranks only (a file written by
// the ranks that write: a full disk): `error` is this rank's message, "" when it did not
// fail. When any rank failed, every rank throws the same UserError, the lowest failing
// rank's message, so run_mpi_main ends the job with that one message and exit 1, instead of
// one rank leaving while the others go on to their next collective.
//   std::string error;
//   try { write_file(); } catch (const UserError& e) { error = e.what(); }
//   raise_agreed_error(comm, error);
void raise_agreed_error(MPI_Comm comm, const std::string& error);

// An owned communicator (freed on destruction) or a borrowed one (never freed).
class Comm {
 public:
  Comm() = default;
  static Comm owned(MPI_Comm comm) { return Comm(comm, true); }
  static Comm borrowed(MPI_Comm comm) { return Comm(comm, false); }
  ~Comm();
  Comm(Comm&& other) noexcept;
  Comm& operator=(Comm&& other) noexcept;
  Comm(const Comm&) = delete;
  Comm& operator=(const Comm&) = delete;

  MPI_Comm get() const { return comm_; }
  int rank() const;
  int size() const;

 private:
  Comm(MPI_Comm comm, bool owned) : comm_(comm), owned_(owned) {}
  MPI_Comm comm_ = MPI_COMM_NULL;
  bool owned_ = false;
};

// Collective over `comm`, the first a program issues: each rank passes its whole run
// configuration (its command line, say). Throws the same UserError on every rank, naming
// the ranks whose configuration differs from rank 0's -- ranks started with different
// flags would otherwise part ways and wait in some later collective until the watchdog.
void check_same_configuration(MPI_Comm comm, const std::string& configuration);

// Collective over `comm`: how many of its ranks run on this rank's node (share its
// memory, MPI_COMM_TYPE_SHARED), this one included.
int ranks_sharing_node(MPI_Comm comm);

// Rank in the job the abort handler was installed for, for messages only (-1 before).
int job_rank_for_messages();

}  // namespace shardlab::parallel
