# The manifest of one checkpoint: manifest.capnp inside the checkpoint directory
# step-<8 digits>/, next to its raw data files. It says which run state the directory
# holds (step, layout of the world that wrote it, config, data position, loss scale and
# fp8 scaling state) and, for every tensor shard, which slice of which full tensor it is
# and where its bytes are, with a checksum. Describing slices (not whole tensors) is what
# lets a checkpoint written by N data-parallel ranks (ZeRO shards) be assembled into any
# other layout.
@0x83ee37e6455238bf;

$import "/capnp/c++.capnp".namespace("dseek::schema");

enum TensorDtype {
  # Reserve 0 so that a zeroed or truncated message never reads as a valid dtype.
  unknown @0;
  f32Le @1;   # IEEE fp32, little-endian
}

enum TensorRole {
  unknown @0;
  param @1;       # model parameter
  adamM @2;       # AdamW first moment
  adamV @3;       # AdamW second moment
}

struct Layout {
  worldSize @0 :UInt32;      # processes that wrote the checkpoint
  dataParallel @1 :UInt32;
  tensorParallel @2 :UInt32;
  pipelineParallel @3 :UInt32;
  zeroStage @4 :UInt32;
}

struct DataPosition {
  # The sample order is a pure function of (seed, step), so the seed and the next step
  # are the whole position in the data: no iterator state needs saving.
  seed @0 :Int64;
  nextStep @1 :Int64;
}

struct TensorShard {
  name @0 :Text;             # ParamLayout name ("h.0.attn.c_attn.weight")
  role @1 :TensorRole;
  dtype @2 :TensorDtype;
  shape @3 :List(Int64);     # of the FULL tensor
  sliceOffset @4 :UInt64;    # first element of the full (row-major) tensor held here
  sliceCount @5 :UInt64;     # elements held here
  file @6 :Text;             # plain file name inside the checkpoint directory
  byteOffset @7 :UInt64;     # where the slice starts in that file
  xxhash64 @8 :UInt64;       # XXH64 of the slice's bytes, seeded (format 2) with a hash of
                             # name, role, dtype, shape and slice (checkpoint::shard_checksum);
                             # format 1: seed 0
}

struct DataFile {
  name @0 :Text;
  bytes @1 :UInt64;          # exact size; a shorter file is truncated
}

struct CheckpointManifest {
  formatVersion @0 :UInt32;
  step @1 :Int64;            # optimizer steps completed
  optimizerSteps @2 :Int64;  # AdamW's own step count (bias correction)
  layout @3 :Layout;
  configToml @4 :Text;       # the job config that wrote it (to_toml)
  data @5 :DataPosition;
  lossScale @6 :Float64;     # dynamic loss scale; fp32 and bf16 training have none: 1
  createdUnixS @7 :Float64;
  tensors @8 :List(TensorShard);
  files @9 :List(DataFile);
  precision @10 :PrecisionState;  # absent in older checkpoints: fresh state on resume
  manifestXxhash64 @11 :UInt64;   # format 2: checkpoint::manifest_checksum of every field above
}

struct PrecisionState {
  # What a resumed mixed-precision run needs to continue the run that wrote it
  # (runtime/checkpoint/precision_state.hpp); the loss scale itself is lossScale above.
  precision @0 :Text;              # train.precision that wrote it: fp32, bf16, fp8
  lossScaleGoodSteps @1 :Int64;    # good steps since the loss scale last changed
  fp8AmaxHistoryLength @2 :Int64;  # amaxes per operand (train.fp8_amax_history)
  fp8AmaxHistories @3 :List(Float32);  # replicas x operands x length, each oldest first
  fp8Scales @4 :List(Float32);     # replicas x operands: the next step's scales
  fp8Replicas @5 :UInt32;          # data-parallel replicas, each with its own histories
}
