// All-reduce by recursive halving then recursive doubling (Rabenseifner; what OpenMPI's
// and MPICH's tuned all-reduce run for mid-size buffers). With P ranks, P a power of two:
// log2(P) reduce-scatter steps, each exchanging half of the current range with ONE
// partner (rank XOR P/2, then P/4, ..., 1) and reducing the half it keeps, until every
// rank holds one fully reduced block; then log2(P) all-gather steps in reverse
// (partner rank XOR 1, 2, ..., P/2) doubling the range each time. The same bytes per rank
// as the ring and the direct reduce-scatter + all-gather, in 2 log2(P) steps, and every
// step waits for one peer only: where ranks outnumber cores, a rank waits for one
// partner to be scheduled instead of every peer (the direct exchange's two N-way
// rendezvous).
//
// Other rank counts fold first, as MPICH does: with P the largest power of two below N
// and R = N - P, ranks 2i and 2i+1 (i < R) pair up, the even one sends its whole input
// to the odd one and waits; the odd one reduces the two and takes part in the P-rank
// all-reduce above; at the end it sends the result back.
//
// Each element is reduced on exactly one rank (the block's owner, after its partial sums
// came from the partners in a fixed tree), then copied to every other rank: every rank
// gets the owner's bits. Operands are combined lower rank first. bf16 partial sums are
// exchanged in bf16 and rounded at every step (log2 P roundings, as the ring rounds at
// each of its N - 1 steps). An average is scaled by its owner once fully reduced.
#pragma once

#include <vector>

#include "comm/operation.hpp"

namespace dseek::comm {

class RecursiveHalvingAllReduce final : public Operation {
 public:
  RecursiveHalvingAllReduce(OpContext ctx, const void* in, void* out, size_t count, DataType type, ReduceOp op,
                            float scale);
  void start() override;
  bool advance() override;

 private:
  // What one step does; a rank runs its steps in order, each after the last completed.
  enum class Step { fold_send, fold_recv, halve, double_up, unfold_send, unfold_recv };
  // Posts the messages of step step_ (sets kind_, level_, partner_); finish() does its
  // arithmetic once they completed.
  void post();
  void finish();
  // Whether step step_ may post its messages: a send reading what its receive overwrites
  // must be done.
  bool may_post();
  // Step `index` of this rank: fold (if any), log2(P) halving, log2(P) doubling, unfold
  // (if any); `level` numbers the halving / doubling steps from 0.
  Step step_kind(int index, int* level) const;
  int halving_mask(int level) const;   // the bit halving step `level` pairs ranks on
  int real_rank(int virtual_rank) const;  // group rank of a rank of the power-of-two group
  size_t block_offset(int block) const;   // first element of block `block` of P (P: count)
  std::byte* at(void* base, size_t element) const;
  const std::byte* at(const void* base, size_t element) const;

  const void* in_;
  void* out_;
  size_t count_;
  DataType type_;
  ReduceOp op_;
  float scale_;
  size_t es_ = 0;
  int pow2_ = 1;      // P
  int levels_ = 0;    // log2(P)
  int extra_ = 0;     // R = N - P ranks folded into their odd neighbour
  int vrank_ = -1;    // this rank in the power-of-two group; -1 for a folded (even) rank
  int steps_ = 0, step_ = 0;
  bool posted_ = false;
  bool reduced_any_ = false;  // `out` holds this rank's partial sums (else `in` is the source)
  int lo_ = 0, len_ = 0;      // the blocks this rank currently holds: [lo_, lo_ + len_)
  // The step in flight: what it is, its level, the partner's rank in the power-of-two
  // group, and (halving) the half this rank keeps.
  Step kind_ = Step::halve;
  int level_ = 0, partner_ = 0;
  int keep_lo_ = 0, keep_len_ = 0;
  StagingPool::Lease inbox_;        // the partner's half (or the folded rank's whole input)
  int first_halving_step_ = 0;
  std::vector<IoPtr> sends_;  // per step; waited for lazily (may_post, and at the end)
  IoPtr recv_;
};

}  // namespace dseek::comm
