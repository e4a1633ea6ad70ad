// A job's state as every party reads it (proto/mapd/v1/jobs.proto JobState): the coordinator's
// state machine and the clients that follow a job both stop at the same states.
#ifndef MAPD_COMMON_JOB_STATE_H_
#define MAPD_COMMON_JOB_STATE_H_

#include "proto/mapd/v1/jobs.pb.h"

namespace mapd {

// SUCCEEDED, FAILED or CANCELLED: a finished job never changes again.
inline bool IsFinished(v1::JobState s) { return s == v1::SUCCEEDED || s == v1::FAILED || s == v1::CANCELLED; }

}  // namespace mapd

#endif  // MAPD_COMMON_JOB_STATE_H_
