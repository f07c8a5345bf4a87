// The typed configuration of a dseek job: one struct per TOML section.
// Every field here has exactly one entry in the key table of config/schema.cpp, which
// gives its default, its valid range and its one-line description; load_config() in
// config/load.hpp fills this struct from a TOML file plus --set overrides.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "runtime/config/enums.hpp"

namespace dseek::config {

struct ModelConfig {
  int64_t dim = 256;       // width of the residual stream (C)
  int64_t layers = 4;      // transformer blocks (L)
  int64_t heads = 4;       // attention heads (NH); dim % heads == 0
  int64_t context = 128;   // tokens per sequence (T), also the size of the position table
  int64_t vocab = 256;     // token ids in [0, vocab); 256 for the byte-level tokenizer
  double init_std = 0.02;  // standard deviation of the normal weight init (GPT-2)
  std::string recompute = "none";  // activation recompute: none or every:N
};

struct TrainConfig {
  int64_t batch_size = 16;       // sequences per optimizer step, whole job
  int64_t micro_batch_size = 0;  // sequences per forward/backward; 0 = batch_size
  int64_t steps = 200;           // optimizer steps
  int64_t seed = 1337;           // seeds weights and the sample order
  int64_t threads = 0;           // compute threads per node; 0 = all cores
  double lr = 1e-3;              // peak learning rate
  double min_lr = 1e-4;          // learning rate at the end of the cosine decay
  int64_t warmup_steps = 20;     // linear warm-up from 0 to lr
  double weight_decay = 0.1;     // decoupled (AdamW); matrices and embeddings only
  double beta1 = 0.9;
  double beta2 = 0.95;
  double eps = 1e-8;
  double grad_clip = 1.0;        // global gradient norm limit; 0 = off
  int64_t eval_every = 50;       // steps between validation passes; 0 = only at the end
  int64_t eval_batches = 4;      // validation batches of batch_size sequences
  Precision precision = Precision::fp32;  // fp32 | bf16 | fp8 (block matmuls; model/precision_policy.hpp)
  int64_t fp8_amax_history = 16;   // fp8: steps of amax history per tensor (delayed scaling)
  int64_t fp8_margin = 0;          // fp8: scales are divided by 2^margin for headroom
  double loss_scale_init = 65536;  // fp8: initial dynamic loss scale (a power of two)
  int64_t loss_scale_window = 1000;  // fp8: good steps before the loss scale doubles
  Device device = Device::cpu;    // cpu | cuda | scrambled-cpu-for-tests (a test device)
  Offload offload = Offload::automatic;  // auto | none (AdamW on the device) | optimizer (on the CPU)
  bool offload_overlap = true;    // the offloaded update overlaps the next step's forward
  std::string run_dir = "runs/default";  // events and outputs go under it
  int64_t stop_after_steps = 0;     // end the run after this step with a checkpoint; 0 = off
  double stop_after_minutes = 0;    // end the run after this long with a checkpoint; 0 = off
  int64_t replica_check_every = 1;  // steps between checksum comparisons of the replicas
  int64_t sdc_audit_every = 100;    // steps between audits of the replicas' own gradients; 0 = off
};

struct DataConfig {
  std::string dir = "data/prepared";  // output of `dseek data prepare`
  int64_t prefetch = 3;               // batches kept ready ahead of the worker
  // The global batch over the data-parallel replicas: equal slices, or micro-batches in
  // proportion to each replica's measured speed, re-shared every rebalance_every steps.
  Balance balance = Balance::equal;
  int64_t rebalance_every = 10;
};

struct ClusterConfig {
  int64_t nodes = 1;    // nodes in the job
  int64_t node_id = 0;  // this node's id, 0..nodes-1
  int64_t gpus_per_node = 1;  // worker groups (ranks) one node runs, one per local device
  std::string coordinator = "127.0.0.1:7420";  // host:port of the coordinator node
  int64_t coordinator_node = 0;  // the node id that runs the coordinator
  // "NODE@HOST:PORT ..." in order of succession: where the coordinator moves when its
  // node is lost for good (backup_coordinators.hpp); "" = no failover.
  std::string backup_coordinators = "";
  std::string advertise_host = "127.0.0.1";  // this node's address for its peers
  std::string secret = "";  // join secret; "" = env DSEEK_CLUSTER_SECRET (never written out)
  int64_t heartbeat_interval_ms = 250;
  int64_t heartbeat_timeout_ms = 1500;  // a node silent this long is lost (hung)
  int64_t join_retries = 20;
  int64_t join_retry_delay_ms = 250;
  int64_t connect_timeout_ms = 2000;
  double start_timeout_s = 120;  // wait this long for the whole world to join
  int64_t max_restarts = 3;      // dseek launch: restarts of a dead local node
  std::string tls_ca = "";       // PEM of the cluster CA; "" = no TLS
  std::string tls_cert = "";     // this node's certificate (signed by tls_ca)
  std::string tls_key = "";      // its private key
  // Without TLS a node off loopback refuses to start; true = run in plain text anyway
  // (the explicit opt-out, warned about at start).
  bool plaintext = false;
};

struct ElasticConfig {
  double rejoin_seconds = 10;  // wait this long for a lost node to come back
  // Consent to finish on fewer nodes than cluster.nodes: 0 (none) = a job that ends with
  // fewer members is an error (exit 3); N = training goes on, and ends well, with >= N.
  int64_t min_nodes = 0;
  // ZeRO >= 1: each node keeps a replica of its ring neighbour's optimizer shard.
  bool shard_replica = true;
};

struct ParallelConfig {
  int64_t data = 1;      // data-parallel replicas
  int64_t tensor = 1;    // tensor-parallel ranks per replica
  int64_t pipeline = 1;  // pipeline stages per replica
  int64_t zero = 0;      // ZeRO stage: 0, 1 (optimizer state) or 2 (and gradients)
  // Pipeline parallelism (parallel.pipeline > 1).
  Schedule schedule = Schedule::one_f_one_b;  // gpipe, 1f1b, interleaved
  int64_t virtual_stages = 1;     // model chunks per stage (interleaved: >= 2)
  int64_t micro_batches = 0;      // per step; 0 = train.batch_size / train.micro_batch_size
  Partition partition = Partition::uniform;  // uniform (block count) or balanced (measured cost)
};

struct CommConfig {
  CommBackend backend = CommBackend::ucx;  // data plane: ucx (host memory) or nccl (GPU)
  int64_t timeout_ms = 30000;        // limit of one collective
  Compression compression = Compression::none;  // none, topk, int8, topk+int8
  double topk_fraction = 0.05;       // fraction of gradient entries kept by topk
  int64_t compression_warmup_steps = 0;  // first steps reduced uncompressed
  int64_t variance_refresh_steps = 20;   // AdamW's v from dense local gradients, synced every N
  double compressed_beta1 = 0.6;         // AdamW's beta1 when v comes from local gradients
};

struct CheckpointConfig {
  int64_t every_steps = 0;  // steps between checkpoints; 0 = none
  std::string dir = "";     // empty = RUN_DIR/checkpoints
  int64_t keep_last = 3;    // old checkpoints kept
  std::string resume = "";  // "" = fresh start, "latest", or a checkpoint directory
  bool async = true;        // write on a background thread (false: the step waits)
};

struct MetricsConfig {
  int64_t log_every = 10;          // steps between plain log lines (no terminal)
  Progress progress = Progress::automatic;  // auto (bar on a terminal), bar, plain, off
  int64_t prometheus_port = 0;     // 0 = no /metrics endpoint; node K serves on port + K
  bool prometheus_port_per_node = true;  // false: every node on prometheus_port (one per pod)
  // The address the /metrics endpoint listens on: loopback unless set (0.0.0.0 = every
  // interface, for a scraper on another host).
  std::string prometheus_host = "127.0.0.1";
  int64_t prometheus_linger_seconds = 0;    // /metrics served this long after training ends
  // The measures' basis (metrics/step_measures.hpp): peak FLOP/s and memory of one worker
  // group's device (0 = measured on CPU, unknown on CUDA), a one-node baseline of tokens/s
  // (0 = none, or the median of baseline_run's steps).
  double peak_flops = 0;
  double device_memory_bytes = 0;
  double baseline_tokens_per_s = 0;
  std::string baseline_run = "";
};

// One [[faults]] entry: a deterministic fault to inject (see config/REFERENCE.md).
struct FaultSpec {
  FaultKind kind = FaultKind::unset;  // kill, hang, crash_actor, drop_messages, slow, ...
  int64_t node = -1;           // node id it applies to; -1 = every node
  int64_t step = -1;           // fire at this step; -1 = use after_seconds
  double after_seconds = -1;   // fire after this many seconds; -1 = use step
  double seconds = -1;         // duration (hang); -1 = forever
  double fraction = 0;         // drop_messages: fraction of messages dropped
  int64_t ms = 0;              // slow: extra milliseconds per step
  std::string actor;           // crash_actor: the actor's name
  FaultDuring during = FaultDuring::step;  // kill/hang: at the step boundary, or reduction
  FaultWhere where = FaultWhere::reduced;  // corrupt_gradient: which gradient
  bool every_step = false;                 // corrupt_gradient: from `step` on, at every step
};

struct JobConfig {
  ModelConfig model;
  TrainConfig train;
  DataConfig data;
  ClusterConfig cluster;
  ElasticConfig elastic;
  ParallelConfig parallel;
  CommConfig comm;
  CheckpointConfig checkpoint;
  MetricsConfig metrics;
  std::vector<FaultSpec> faults;
  std::string source;  // where it came from ("config/single.toml", "defaults"), for messages
};

// Whether AdamW runs on the host CPU in the node's gradient_shard actors (train.offload =
// "optimizer") rather than on the trainer's device ("none"). "auto": on the CPU device
// the shards (the host is the device: nothing crosses); on a GPU the device (parameters
// and gradients stay in its memory).
inline bool optimizer_offloaded(const JobConfig& config) {
  if (config.train.offload != Offload::automatic) return config.train.offload == Offload::optimizer;
  return config.train.device == Device::cpu;
}

}  // namespace dseek::config
