// A readable text form of a graph, one line per input, parameter and node:
//
//   graph gpt2 {
//     input tokens: i64[8,1024]  # tokens
//     param wte.weight: f32[50257,768]  # parameter, trainable, normal(0, 0.02)
//     %h.0/ln_1/layer_norm = layer_norm(%x, %h.0.ln_1.weight, %h.0.ln_1.bias) {eps=1e-05, ...}
//         : f32[8,1024,768]  @h.0.ln_1
//     return %loss
//   }
#ifndef MAPD_MODEL_IR_DUMP_H_
#define MAPD_MODEL_IR_DUMP_H_

#include <string>

#include "proto/mapd/v1/graph.pb.h"

namespace mapd {

std::string DumpGraphText(const v1::Graph& graph);
std::string InitRuleToString(const v1::InitRule& init);
// "parameter", "buffer", "constant".
const char* ParameterKindName(v1::Parameter::Kind kind);

}  // namespace mapd

#endif  // MAPD_MODEL_IR_DUMP_H_
