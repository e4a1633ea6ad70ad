// aten::lstm and aten::gru, unrolled over time into registry ops exactly as LibTorch's CPU
// implementation computes them (aten/src/ATen/native/RNN.cpp: FullLayer, LSTMCell, GRUCell):
// per layer and direction the input projection of the whole sequence at once
// (linear(x, w_ih, b_ih), [T, B, G*H]), then per step linear(h, w_hh, b_hh) plus the step's
// projection, the gates, and the new state; the steps' outputs stacked, directions
// concatenated, dropout between layers in training. So outputs, gradients and what autograd
// keeps are those of PyTorch's, op by op, and the profiler counts them like any other graph.
#include "common/status_macros.h"
#include "model/import/importer_internal.h"

namespace mapd {
namespace import_internal {
namespace {

enum class Cell { kLstm, kGru };

struct Weights {
  std::string w_ih, w_hh, b_ih, b_hh;  // biases "" without them
};

struct State {
  std::string h, c;  // c: LSTM only
};

// One time step of the cell on the step's input projection `x_w` ([B, G*H]).
absl::StatusOr<State> Step(Importer& im, Node* n, Cell cell, const Weights& w, const std::string& x_w, const State& s) {
  MAPD_ASSIGN_OR_RETURN(std::string hh, EmitTensor(im, n, "linear", {s.h, w.w_hh, w.b_hh}));
  if (cell == Cell::kLstm) {
    MAPD_ASSIGN_OR_RETURN(std::string gates, EmitTensor(im, n, "add", {hh, x_w}));
    MAPD_ASSIGN_OR_RETURN(std::vector<AValue> g, im.Emit(n, "chunk", {gates}, Attrs().Int("chunks", 4).Int("dim", 1)));
    MAPD_ASSIGN_OR_RETURN(std::string in, EmitTensor(im, n, "sigmoid", {g[0].tensor}));
    MAPD_ASSIGN_OR_RETURN(std::string forget, EmitTensor(im, n, "sigmoid", {g[1].tensor}));
    MAPD_ASSIGN_OR_RETURN(std::string cand, EmitTensor(im, n, "tanh", {g[2].tensor}));
    MAPD_ASSIGN_OR_RETURN(std::string out, EmitTensor(im, n, "sigmoid", {g[3].tensor}));
    MAPD_ASSIGN_OR_RETURN(std::string kept, EmitTensor(im, n, "mul", {forget, s.c}));
    MAPD_ASSIGN_OR_RETURN(std::string added, EmitTensor(im, n, "mul", {in, cand}));
    MAPD_ASSIGN_OR_RETURN(std::string c, EmitTensor(im, n, "add", {kept, added}));
    MAPD_ASSIGN_OR_RETURN(std::string tc, EmitTensor(im, n, "tanh", {c}));
    MAPD_ASSIGN_OR_RETURN(std::string h, EmitTensor(im, n, "mul", {out, tc}));
    return State{h, c};
  }
  MAPD_ASSIGN_OR_RETURN(std::vector<AValue> ig, im.Emit(n, "chunk", {x_w}, Attrs().Int("chunks", 3).Int("dim", 1)));
  MAPD_ASSIGN_OR_RETURN(std::vector<AValue> hg, im.Emit(n, "chunk", {hh}, Attrs().Int("chunks", 3).Int("dim", 1)));
  MAPD_ASSIGN_OR_RETURN(std::string r_sum, EmitTensor(im, n, "add", {hg[0].tensor, ig[0].tensor}));
  MAPD_ASSIGN_OR_RETURN(std::string reset, EmitTensor(im, n, "sigmoid", {r_sum}));
  MAPD_ASSIGN_OR_RETURN(std::string z_sum, EmitTensor(im, n, "add", {hg[1].tensor, ig[1].tensor}));
  MAPD_ASSIGN_OR_RETURN(std::string update, EmitTensor(im, n, "sigmoid", {z_sum}));
  MAPD_ASSIGN_OR_RETURN(std::string hr, EmitTensor(im, n, "mul", {hg[2].tensor, reset}));
  MAPD_ASSIGN_OR_RETURN(std::string n_sum, EmitTensor(im, n, "add", {ig[2].tensor, hr}));
  MAPD_ASSIGN_OR_RETURN(std::string cand, EmitTensor(im, n, "tanh", {n_sum}));
  MAPD_ASSIGN_OR_RETURN(std::string diff, EmitTensor(im, n, "sub", {s.h, cand}));
  MAPD_ASSIGN_OR_RETURN(std::string scaled, EmitTensor(im, n, "mul", {diff, update}));
  MAPD_ASSIGN_OR_RETURN(std::string h, EmitTensor(im, n, "add", {scaled, cand}));
  return State{h, ""};
}

struct LayerResult {
  std::string output;  // [T, B, H]
  State final;
};

// One direction of one layer over `x` ([T, B, I]); reversed steps for the backward direction.
absl::StatusOr<LayerResult> Direction(Importer& im, Node* n, Cell cell, const Weights& w, const std::string& x,
                                      int64_t steps, State s, bool reverse) {
  MAPD_ASSIGN_OR_RETURN(std::string x_w, EmitTensor(im, n, "linear", {x, w.w_ih, w.b_ih}));
  // The steps' projections as LibTorch's input_w.unbind(0) takes them: one node whose backward
  // makes x_w's gradient once (a select per step would each make a zero-filled x_w-sized one).
  MAPD_ASSIGN_OR_RETURN(std::vector<AValue> pieces, im.Emit(n, "chunk", {x_w}, Attrs().Int("chunks", steps).Int("dim", 0)));
  std::vector<std::string> outs(steps);
  for (int64_t k = 0; k < steps; ++k) {
    const int64_t t = reverse ? steps - 1 - k : k;
    MAPD_ASSIGN_OR_RETURN(std::string x_t, EmitTensor(im, n, "squeeze", {pieces[t].tensor}, Attrs().Ints("dims", {0})));
    MAPD_ASSIGN_OR_RETURN(s, Step(im, n, cell, w, x_t, s));
    outs[t] = s.h;
  }
  MAPD_ASSIGN_OR_RETURN(std::string output, EmitTensor(im, n, "stack", outs, Attrs().Int("dim", 0)));
  return LayerResult{output, s};
}

// lstm(input, hx[h0, c0], params, has_biases, num_layers, dropout, train, bidirectional,
// batch_first) -> (output, h_n, c_n); gru(input, hx, params, ...) -> (output, h_n).
Handler Rnn(Cell cell) {
  return [cell](Importer& im, Node* n, const Args& a) -> Result {
    const bool packed = cell == Cell::kLstm ? a.size() > 1 && a[1].kind != AValue::Kind::kList
                                            : a.size() > 2 && a[2].kind != AValue::Kind::kList;
    if (a.size() != 9 || packed) {
      return im.Error(n, "packed sequences are not supported; pass a padded tensor");
    }
    MAPD_ASSIGN_OR_RETURN(std::string x, im.TensorArg(n, a, 0));
    std::string h0, c0;
    if (cell == Cell::kLstm) {
      MAPD_ASSIGN_OR_RETURN(std::vector<std::string> hx, im.TensorListArg(n, a, 1));
      if (hx.size() != 2) return im.Error(n, "expected (h0, c0)");
      h0 = hx[0];
      c0 = hx[1];
    } else {
      MAPD_ASSIGN_OR_RETURN(h0, im.TensorArg(n, a, 1));
    }
    MAPD_ASSIGN_OR_RETURN(std::vector<std::string> params, im.TensorListArg(n, a, 2));
    MAPD_ASSIGN_OR_RETURN(bool biases, im.BoolArg(n, a, 3));
    MAPD_ASSIGN_OR_RETURN(int64_t layers, im.IntArg(n, a, 4));
    MAPD_ASSIGN_OR_RETURN(double dropout, im.DoubleArg(n, a, 5));
    MAPD_ASSIGN_OR_RETURN(bool train, im.BoolArg(n, a, 6));
    MAPD_ASSIGN_OR_RETURN(bool bidirectional, im.BoolArg(n, a, 7));
    MAPD_ASSIGN_OR_RETURN(bool batch_first, im.BoolArg(n, a, 8));
    const int64_t dirs = bidirectional ? 2 : 1, per = biases ? 4 : 2;
    if (static_cast<int64_t>(params.size()) != layers * dirs * per) {
      return im.Error(n, absl::StrCat("expected ", layers * dirs * per, " weights for ", layers, " layers, got ", params.size(),
                                      " (LSTM projections, proj_size > 0, are not supported)"));
    }
    if (batch_first) {
      MAPD_ASSIGN_OR_RETURN(x, EmitTensor(im, n, "transpose", {x}, Attrs().Int("dim0", 0).Int("dim1", 1)));
    }
    const int64_t steps = im.builder().TypeOf(x)->shape[0];
    std::vector<std::string> hs, cs;
    for (int64_t l = 0; l < layers; ++l) {
      std::vector<std::string> outs;
      for (int64_t d = 0; d < dirs; ++d) {
        const int64_t k = (l * dirs + d) * per;
        const Weights w{params[k], params[k + 1], biases ? params[k + 2] : "", biases ? params[k + 3] : ""};
        State s;
        const Attrs at = Attrs().Int("dim", 0).Int("index", l * dirs + d);
        MAPD_ASSIGN_OR_RETURN(s.h, EmitTensor(im, n, "select", {h0}, at));
        if (cell == Cell::kLstm) {
          MAPD_ASSIGN_OR_RETURN(s.c, EmitTensor(im, n, "select", {c0}, at));
        }
        MAPD_ASSIGN_OR_RETURN(LayerResult r, Direction(im, n, cell, w, x, steps, s, d == 1));
        outs.push_back(r.output);
        hs.push_back(r.final.h);
        cs.push_back(r.final.c);
      }
      x = outs[0];
      if (dirs == 2) {
        MAPD_ASSIGN_OR_RETURN(x, EmitTensor(im, n, "cat", outs, Attrs().Int("dim", -1)));
      }
      if (dropout > 0 && train && l + 1 < layers) {
        MAPD_ASSIGN_OR_RETURN(x, EmitTensor(im, n, "dropout", {x}, Attrs().Float("p", dropout).Bool("train", true)));
      }
    }
    if (batch_first) {
      MAPD_ASSIGN_OR_RETURN(x, EmitTensor(im, n, "transpose", {x}, Attrs().Int("dim0", 0).Int("dim1", 1)));
    }
    MAPD_ASSIGN_OR_RETURN(std::string h_n, EmitTensor(im, n, "stack", hs, Attrs().Int("dim", 0)));
    std::vector<AValue> result = {AValue::Tensor(x), AValue::Tensor(h_n)};
    if (cell == Cell::kLstm) {
      MAPD_ASSIGN_OR_RETURN(std::string c_n, EmitTensor(im, n, "stack", cs, Attrs().Int("dim", 0)));
      result.push_back(AValue::Tensor(c_n));
    }
    return result;
  };
}

}  // namespace

void AddRnnHandlers(std::map<std::string, Handler>& m) {
  m["aten::lstm"] = Rnn(Cell::kLstm);
  m["aten::gru"] = Rnn(Cell::kGru);
}

}  // namespace import_internal
}  // namespace mapd
