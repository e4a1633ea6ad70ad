// Job specs a store wrote before the training fields moved into JobSpec.training: those fields
// (steps, optimizer, lr, data, ...) were JobSpec's numbers 4, 9-11, 14, 15, 17, 18 and 20-25,
// which TrainingConfig keeps, so they parse as JobSpec's unknown fields and read as a
// TrainingConfig unchanged. A store's jobs go through this once as they are loaded.
#ifndef MAPD_SERVER_STORE_LEGACY_SPEC_H_
#define MAPD_SERVER_STORE_LEGACY_SPEC_H_

#include "proto/mapd/v1/jobs.pb.h"

namespace mapd {

// Moves a legacy spec's training fields into spec->training (a spec that has `training` already,
// or no unknown fields, is left as it is).
void MoveLegacyTrainingFields(v1::JobSpec* spec);

}  // namespace mapd

#endif  // MAPD_SERVER_STORE_LEGACY_SPEC_H_
