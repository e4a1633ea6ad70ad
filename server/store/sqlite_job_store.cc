// Jobs and events in SQLite, each row a serialized proto (the proto is the schema; SQLite keeps
// order, atomicity and durability). WAL mode: readers do not block the writer, and a crash
// loses at most the transaction in flight.
#include <sqlite3.h>

#include <utility>

#include "absl/strings/str_cat.h"
#include "common/file_lock.h"
#include "server/store/job_store.h"
#include "server/store/legacy_spec.h"

namespace mapd {

namespace {

// A row callback for Query: parses each blob as a T into `out` (false: it does not parse).
template <typename T>
auto ParsedInto(std::vector<T>& out) {
  return [&out](const void* data, int size) {
    T message;
    if (!message.ParseFromArray(data, size)) return false;
    out.push_back(std::move(message));
    return true;
  };
}

class SqliteJobStore : public JobStore {
 public:
  SqliteJobStore(sqlite3* db, std::string path, FileLock lock) : db_(db), path_(std::move(path)), lock_(std::move(lock)) {}
  ~SqliteJobStore() override { sqlite3_close(db_); }

  absl::Status Init() {
    // synchronous=FULL: a write the coordinator has answered for (a submitted job, a state
    // change) survives a power loss too, not only a crash of mapd (WAL with NORMAL may lose the
    // last commits). A job's progress writes are few (JobManager keeps ~1,000 steps a job).
    for (const char* sql : {"PRAGMA journal_mode=WAL", "PRAGMA synchronous=FULL",
                            "CREATE TABLE IF NOT EXISTS jobs (id INTEGER PRIMARY KEY, job BLOB NOT NULL)",
                            "CREATE TABLE IF NOT EXISTS events (job_id INTEGER NOT NULL, seq INTEGER NOT NULL, "
                            "event BLOB NOT NULL, PRIMARY KEY (job_id, seq))",
                            "CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value INTEGER NOT NULL)"}) {
      if (auto st = Exec(sql); !st.ok()) return st;
    }
    return absl::OkStatus();
  }

  absl::Status Write(const v1::Job& job, const v1::JobEvent& event) override {
    if (auto st = Exec("BEGIN IMMEDIATE"); !st.ok()) return st;
    absl::Status st = Put("INSERT OR REPLACE INTO jobs (id, job) VALUES (?1, ?2)", job.id(), 0, job.SerializeAsString());
    if (st.ok()) {
      st = Put("INSERT INTO events (job_id, seq, event) VALUES (?1, ?3, ?2)", event.job_id(), event.seq(),
               event.SerializeAsString());
    }
    if (!st.ok()) {
      (void)Exec("ROLLBACK");
      return st;
    }
    return Exec("COMMIT");
  }

  absl::Status Delete(int64_t job_id) override {
    if (auto st = Exec("BEGIN IMMEDIATE"); !st.ok()) return st;
    absl::Status st;
    for (const char* sql : {"DELETE FROM events WHERE job_id = ?1", "DELETE FROM jobs WHERE id = ?1",
                            "INSERT INTO meta (key, value) VALUES ('max_deleted_job_id', ?1) "
                            "ON CONFLICT (key) DO UPDATE SET value = max(value, excluded.value)"}) {
      if (st = Run(sql, job_id); !st.ok()) break;
    }
    if (!st.ok()) {
      (void)Exec("ROLLBACK");
      return st;
    }
    return Exec("COMMIT");
  }

  absl::StatusOr<int64_t> MaxDeletedId() const override {
    const char* sql = "SELECT value FROM meta WHERE key = 'max_deleted_job_id'";
    sqlite3_stmt* stmt = nullptr;
    if (sqlite3_prepare_v2(db_, sql, -1, &stmt, nullptr) != SQLITE_OK) return Error(sql);
    const int rc = sqlite3_step(stmt);
    const int64_t value = rc == SQLITE_ROW ? sqlite3_column_int64(stmt, 0) : 0;
    sqlite3_finalize(stmt);
    if (rc != SQLITE_ROW && rc != SQLITE_DONE) return Error(sql);
    return value;
  }

  absl::StatusOr<std::vector<v1::Job>> LoadJobs() const override {
    std::vector<v1::Job> out;
    if (auto st = Query("SELECT job FROM jobs ORDER BY id", 0, 0, ParsedInto(out)); !st.ok()) return st;
    for (v1::Job& job : out) MoveLegacyTrainingFields(job.mutable_spec());
    return out;
  }

  absl::StatusOr<std::vector<v1::JobEvent>> LoadEvents(int64_t job_id, int64_t after_seq) const override {
    std::vector<v1::JobEvent> out;
    if (auto st = Query("SELECT event FROM events WHERE job_id = ?1 AND seq > ?2 ORDER BY seq", job_id, after_seq, ParsedInto(out));
        !st.ok()) {
      return st;
    }
    return out;
  }

 private:
  absl::Status Error(const std::string& what) const {
    return absl::InternalError(absl::StrCat("job store ", path_, ": ", what, ": ", sqlite3_errmsg(db_)));
  }

  absl::Status Exec(const char* sql) {
    char* err = nullptr;
    if (sqlite3_exec(db_, sql, nullptr, nullptr, &err) != SQLITE_OK) {
      const std::string msg = err != nullptr ? err : "unknown error";
      sqlite3_free(err);
      return absl::InternalError(absl::StrCat("job store ", path_, ": ", sql, ": ", msg));
    }
    return absl::OkStatus();
  }

  // Runs a statement binding ?1 = a.
  absl::Status Run(const char* sql, int64_t a) {
    sqlite3_stmt* stmt = nullptr;
    if (sqlite3_prepare_v2(db_, sql, -1, &stmt, nullptr) != SQLITE_OK) return Error(sql);
    sqlite3_bind_int64(stmt, 1, a);
    const int rc = sqlite3_step(stmt);
    sqlite3_finalize(stmt);
    return rc == SQLITE_DONE ? absl::OkStatus() : Error(sql);
  }

  // Runs an insert binding ?1 = a, ?2 = blob, ?3 = b.
  absl::Status Put(const char* sql, int64_t a, int64_t b, const std::string& blob) {
    sqlite3_stmt* stmt = nullptr;
    if (sqlite3_prepare_v2(db_, sql, -1, &stmt, nullptr) != SQLITE_OK) return Error(sql);
    sqlite3_bind_int64(stmt, 1, a);
    sqlite3_bind_blob(stmt, 2, blob.data(), static_cast<int>(blob.size()), SQLITE_TRANSIENT);
    if (sqlite3_bind_parameter_count(stmt) >= 3) sqlite3_bind_int64(stmt, 3, b);
    const int rc = sqlite3_step(stmt);
    sqlite3_finalize(stmt);
    if (rc == SQLITE_CONSTRAINT) {
      return absl::AlreadyExistsError(absl::StrCat("job store ", path_, ": job ", a, " already has event ", b));
    }
    if (rc != SQLITE_DONE) return Error(sql);
    return absl::OkStatus();
  }

  // Runs a query binding ?1 = a, ?2 = b; `row` gets each row's first column (a blob).
  template <typename Row>
  absl::Status Query(const char* sql, int64_t a, int64_t b, Row row) const {
    sqlite3_stmt* stmt = nullptr;
    if (sqlite3_prepare_v2(db_, sql, -1, &stmt, nullptr) != SQLITE_OK) return Error(sql);
    if (sqlite3_bind_parameter_count(stmt) >= 1) sqlite3_bind_int64(stmt, 1, a);
    if (sqlite3_bind_parameter_count(stmt) >= 2) sqlite3_bind_int64(stmt, 2, b);
    int rc;
    while ((rc = sqlite3_step(stmt)) == SQLITE_ROW) {
      if (!row(sqlite3_column_blob(stmt, 0), sqlite3_column_bytes(stmt, 0))) {
        sqlite3_finalize(stmt);
        return absl::DataLossError(absl::StrCat("job store ", path_, ": a row does not parse (", sql, ")"));
      }
    }
    sqlite3_finalize(stmt);
    if (rc != SQLITE_DONE) return Error(sql);
    return absl::OkStatus();
  }

  sqlite3* db_;
  std::string path_;
  FileLock lock_;  // this coordinator's alone (OpenSqliteJobStore)
};

}  // namespace

absl::StatusOr<std::unique_ptr<JobStore>> OpenSqliteJobStore(const std::string& path) {
  // One coordinator a store: two would each recover, dispatch and time out the same jobs — every
  // job run twice, its ranks fenced by neither. SQLite's own locks only serialise the writes.
  auto lock = FileLock::TryAcquire(path + ".lock", absl::StrCat("the job store ", path));
  if (!lock.ok()) {
    if (lock.status().code() != absl::StatusCode::kFailedPrecondition) {
      return absl::UnavailableError(absl::StrCat("cannot open the job store ", path, ": ", lock.status().message(),
                                                 " (is the directory there and writable?)"));
    }
    return absl::FailedPreconditionError(absl::StrCat(lock.status().message(), " — another mapd serves from it; stop that one, or give this one ",
                                                      "another --store"));
  }
  sqlite3* db = nullptr;
  if (sqlite3_open_v2(path.c_str(), &db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_FULLMUTEX, nullptr) != SQLITE_OK) {
    const std::string msg = db != nullptr ? sqlite3_errmsg(db) : "out of memory";
    sqlite3_close(db);
    return absl::UnavailableError(absl::StrCat("cannot open the job store ", path, ": ", msg,
                                               " (is the directory there and writable?)"));
  }
  auto store = std::make_unique<SqliteJobStore>(db, path, *std::move(lock));
  if (auto st = store->Init(); !st.ok()) return st;
  return std::unique_ptr<JobStore>(std::move(store));
}

}  // namespace mapd
