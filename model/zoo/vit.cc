// Vision Transformer (torchvision vit_b_16 / vit_h_14 names): conv patch embedding, a class
// token, learned positions, pre-LN encoder blocks and a linear head on the class token.
#include "absl/strings/str_cat.h"
#include "model/ir/attrs.h"
#include "model/zoo/family.h"
#include "model/zoo/layers.h"

namespace mapd {
namespace {

absl::Status BuildVit(ModelOptions& o, GraphBuilder& b) {
  const TransformerSizes t = ReadTransformerSizes(o);
  const int64_t patch = o.Size("patch"), image = o.Size("image"), classes = o.Size("classes");
  o.Require(image % patch == 0, "image=", image, " is not divisible by patch=", patch);
  if (!o.status().ok()) return o.status();

  Layers L(b, t.dtype);
  const int64_t batch = t.batch, hidden = t.hidden;
  const v1::InitRule init = NormalInit(0.02);
  const std::string images = b.Input("images", TensorType{t.dtype, {batch, 3, image, image}}, "images");
  const std::string labels = L.IndexInput("labels", {batch}, "labels");
  const int64_t tokens = (image / patch) * (image / patch) + 1;  // patches + class token

  // [B, 3, H, W] -> [B, hidden, H/p, W/p] -> [B, patches, hidden]
  std::string x = L.Conv2d("conv_proj", images, hidden, patch, patch, 0, true);
  x = b.Op("flatten", {x}, Attrs().Int("start_dim", 2));
  x = b.Op("transpose", {x}, Attrs().Int("dim0", 1).Int("dim1", 2));
  const std::string cls = L.Param("class_token", {1, 1, hidden}, ZerosInit());
  const std::string cls_batch = b.Op("expand", {cls}, Attrs().Ints("shape", {batch, -1, -1}));
  x = b.Op("cat", {cls_batch, x}, Attrs().Int("dim", 1));

  // torchvision: attention is nn.MultiheadAttention (in_proj_weight/in_proj_bias, so no qkv
  // module name), the MLP is nn.Sequential(Linear, GELU, Dropout, Linear).
  const PreLnBlockSpec block{{"ln_1", "self_attention", "", "out_proj", "ln_2", "mlp", "0", "3"},
                             "none", 1e-6, /*causal=*/false, t.heads, t.ffn, init, init};
  {
    ScopeGuard enc(b, "encoder");
    x = L.Add(x, L.Param("pos_embedding", {1, tokens, hidden}, init));
    for (int64_t i = 0; i < t.layers; ++i) {
      ScopeGuard scope(b, absl::StrCat("layers.encoder_layer_", i));
      x = L.PreLnBlock(x, block);
    }
    x = L.LayerNorm("ln", x, 1e-6);
  }
  const std::string first = b.Op("select", {x}, Attrs().Int("dim", 1).Int("index", 0));
  std::string logits;
  {
    ScopeGuard heads_scope(b, "heads");
    logits = L.Linear("head", first, classes, true, ZerosInit());  // torchvision zero-inits the head
  }
  L.ClassificationLoss(logits, labels);
  return absl::OkStatus();
}

ZooEntry Vit(const char* name, const char* description, int64_t published, int64_t layers, int64_t hidden,
             int64_t heads, int64_t patch) {
  std::vector<ZooOption> o = TransformerOptions(layers, hidden, heads);
  o.push_back({"patch", std::to_string(patch), "patch size (conv kernel and stride)"});
  o.push_back({"image", "224", "image height and width (a multiple of patch)"});
  o.push_back({"classes", "1000", "classifier outputs"});
  o.push_back(DTypeOption());
  return {{name, "vit", description, published, std::move(o)}, BuildVit};
}

}  // namespace

std::vector<ZooEntry> VitModels() {
  return {
      Vit("vit-base", "ViT-B/16 (Dosovitskiy et al. 2020), 224x224", 86567656, 12, 768, 12, 16),
      Vit("vit-huge", "ViT-H/14, 224x224", 632045800, 32, 1280, 16, 14),
  };
}

}  // namespace mapd
