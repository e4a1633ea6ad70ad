// Node attributes: a builder for code that makes nodes, and printing.
#ifndef MAPD_MODEL_IR_ATTRS_H_
#define MAPD_MODEL_IR_ATTRS_H_

#include <cstdint>
#include <string>
#include <vector>

#include "google/protobuf/map.h"
#include "proto/mapd/v1/graph.pb.h"

namespace mapd {

using AttrMap = google::protobuf::Map<std::string, v1::AttrValue>;

// Fluent builder: Attrs().Int("dim", -1).Float("eps", 1e-5).
class Attrs {
 public:
  Attrs& Int(const std::string& name, int64_t v);
  Attrs& Float(const std::string& name, double v);
  Attrs& Str(const std::string& name, const std::string& v);
  Attrs& Bool(const std::string& name, bool v);
  Attrs& Ints(const std::string& name, const std::vector<int64_t>& v);
  Attrs& Floats(const std::string& name, const std::vector<double>& v);
  Attrs& Strings(const std::string& name, const std::vector<std::string>& v);
  Attrs& Set(const std::string& name, const v1::AttrValue& v);

  const AttrMap& map() const { return map_; }

 private:
  AttrMap map_;
};

// "3", "0.5", "'tanh'", "true", "[1,2]".
std::string AttrValueToString(const v1::AttrValue& v);
// "dim=-1, eps=1e-05" with keys sorted, for dumps and messages.
std::string AttrMapToString(const AttrMap& attrs);
// Name of the field set in `v`: "int", "float", "string", "bool", "ints", "floats", "strings".
const char* AttrKindName(const v1::AttrValue& v);

}  // namespace mapd

#endif  // MAPD_MODEL_IR_ATTRS_H_
