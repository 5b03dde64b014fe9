// Output paths checked before any work, and whole files written so that a failure is clear.
//
// Checked before any work: a run that would fail at its first write (a
// checkpoint directory on a read-only disk, a metrics file in a missing directory) fails
// at start-up instead, with the flag, the path and the fix.
//
//   check_writable_directory(run.ckpt_dir, "--ckpt-dir");   // created if missing
//   check_writable_file(run.metrics, "--metrics");          // left as it was
//   write_file(run.trace, json, "trace file");              // whole, or not at all
#pragma once

#include <string>

namespace shardlab {

// Creates `dir` (and its parents) if need be and probes it with a file; UserError naming
// `flag`, the path and the reason otherwise.
void check_writable_directory(const std::string& dir, const std::string& flag);
// Checks that `path` (its directory created if need be) can be opened for appending,
// leaving it as it was; an empty path is not checked.
void check_writable_file(const std::string& path, const std::string& flag);
// Writes `text` to `path` (truncating it) and closes it; when any write fails (a full
// disk), removes the partial file and throws UserError naming `what`, the path and the
// system's reason.
void write_file(const std::string& path, const std::string& text, const std::string& what);

}  // namespace shardlab
