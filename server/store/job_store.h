// Where the coordinator keeps its jobs and their events (DESIGN §9): a narrow interface with an
// in-memory store for tests and a SQLite one (WAL) for `mapd`, so a restarted coordinator reloads
// every job and its history. Stores are not thread-safe: the job manager serialises its calls.
#ifndef MAPD_SERVER_STORE_JOB_STORE_H_
#define MAPD_SERVER_STORE_JOB_STORE_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "proto/mapd/v1/jobs.pb.h"

namespace mapd {

class JobStore {
 public:
  virtual ~JobStore() = default;
  // The job as it is now (inserted or replaced by id) and the event that made it so, in one
  // transaction. ALREADY_EXISTS when the event's (job_id, seq) is taken.
  virtual absl::Status Write(const v1::Job& job, const v1::JobEvent& event) = 0;
  // Every job, by id.
  virtual absl::StatusOr<std::vector<v1::Job>> LoadJobs() const = 0;
  // A job's events with seq > after_seq, in order.
  virtual absl::StatusOr<std::vector<v1::JobEvent>> LoadEvents(int64_t job_id, int64_t after_seq) const = 0;
  // Deletes a job and its events (one transaction), remembering its id as used.
  virtual absl::Status Delete(int64_t job_id) = 0;
  // The highest id ever deleted (0: none), so that a restarted coordinator never gives a deleted
  // job's id — and its checkpoint directory, its workers' run directories — to a new one.
  virtual absl::StatusOr<int64_t> MaxDeletedId() const = 0;
};

std::unique_ptr<JobStore> NewMemoryJobStore();

// Opens (creating if needed) the SQLite database at `path` in WAL mode, for this process alone: it
// holds an exclusive lock on `path`.lock while the store is open, and FAILED_PRECONDITION names
// the other process (its pid) when one holds it. Errors name the path.
absl::StatusOr<std::unique_ptr<JobStore>> OpenSqliteJobStore(const std::string& path);

}  // namespace mapd

#endif  // MAPD_SERVER_STORE_JOB_STORE_H_
