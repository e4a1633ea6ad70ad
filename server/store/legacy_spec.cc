#include "server/store/legacy_spec.h"

#include <string>

#include <google/protobuf/unknown_field_set.h>

namespace mapd {

void MoveLegacyTrainingFields(v1::JobSpec* spec) {
  const google::protobuf::Reflection* r = spec->GetReflection();
  const google::protobuf::UnknownFieldSet& unknown = r->GetUnknownFields(*spec);
  if (unknown.empty() || spec->has_training()) return;
  std::string bytes;
  if (!unknown.SerializeToString(&bytes)) return;
  // Numbers TrainingConfig does not know stay unknown there, as they were in the spec.
  if (!spec->mutable_training()->ParseFromString(bytes)) {
    spec->clear_training();
    return;
  }
  r->MutableUnknownFields(spec)->Clear();
}

}  // namespace mapd
