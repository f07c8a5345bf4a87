// Where each GPT parameter tensor lives in the one flat parameter buffer (and, at the
// same offsets, in the flat gradient and optimizer-state buffers).
//
// Order: wte, wpe, then each block's tensors together, then the final LayerNorm. Keeping
// a block contiguous makes a pipeline stage's parameters one slice of the buffer, and
// gradient buckets map to layers in the order the backward pass finishes them. Names
// follow the PyTorch reference model (tests/reference/gpt_reference.py) so weights can
// be compared and exported by name.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace dseek::model {

struct GptShape {
  int64_t dim = 0;      // C
  int64_t layers = 0;   // L
  int64_t heads = 0;    // NH
  int64_t context = 0;  // T (max)
  int64_t vocab = 0;    // V
};

// A contiguous range of the flat buffers, in floats: the unit in which gradients become
// final during backward, are reduced across data-parallel replicas, and are owned by one
// ZeRO shard.
struct ParamRange {
  size_t offset = 0;
  size_t count = 0;
  size_t end() const { return offset + count; }
  bool operator==(const ParamRange&) const = default;
};

// The parts of `ranges` that lie inside `pieces` (both of one buffer), in the order of
// `ranges`: a replica's share of a norm's ranges under ZeRO, say.
std::vector<ParamRange> ranges_within(const std::vector<ParamRange>& ranges,
                                      const std::vector<ParamRange>& pieces);

struct ParamTensor {
  std::string name;
  size_t offset = 0;              // in floats, into the flat buffer
  std::vector<int64_t> shape;
  bool decay = false;             // weight decay applies (matrices and embeddings)
  bool residual_projection = false;  // output projections: GPT-2 scales their init
  size_t size() const;
};

// The parameters of one transformer block, as offsets into the flat buffer.
struct BlockParams {
  size_t ln1_w, ln1_b, qkv_w, qkv_b, attn_proj_w, attn_proj_b;
  size_t ln2_w, ln2_b, fc_w, fc_b, fc_proj_w, fc_proj_b;
};

class ParamLayout {
 public:
  explicit ParamLayout(const GptShape& shape);

  const GptShape& shape() const { return shape_; }
  size_t total() const { return total_; }
  const std::vector<ParamTensor>& tensors() const { return tensors_; }

  size_t wte() const { return wte_; }
  size_t wpe() const { return wpe_; }
  const BlockParams& block(int64_t layer) const { return blocks_[static_cast<size_t>(layer)]; }
  size_t lnf_w() const { return lnf_w_; }
  size_t lnf_b() const { return lnf_b_; }
  // [begin, end) of block `layer`'s parameters in the flat buffer.
  size_t block_begin(int64_t layer) const;
  size_t block_end(int64_t layer) const;

 private:
  size_t add(const std::string& name, std::vector<int64_t> shape, bool decay,
             bool residual_projection = false);

  GptShape shape_;
  std::vector<ParamTensor> tensors_;
  std::vector<BlockParams> blocks_;
  size_t wte_ = 0, wpe_ = 0, lnf_w_ = 0, lnf_b_ = 0, total_ = 0;
};

}  // namespace dseek::model
