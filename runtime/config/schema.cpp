// The key table of the job configuration (see schema.hpp) and the helpers that check
// and print a key's value. Adding a key: a field in job_config.hpp, one line here.
#include "runtime/config/schema.hpp"

#include "runtime/util/json_line.hpp"

#include <algorithm>
#include <array>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <stdexcept>

namespace dseek::config::schema {

namespace {

// Reaches a field through a chain of member pointers (&JobConfig::model, &ModelConfig::dim)
// so that each table row names its field once and the accessors are generated.
template <class Root, auto... Members>
struct Field {
  static const auto& ref(const Root& root) { return (root .* ... .* Members); }
  static auto& ref(Root& root) { return (root .* ... .* Members); }
  using T = std::remove_cvref_t<decltype(ref(std::declval<Root&>()))>;

  // An enum field is its name in a Value (EnumNames lists them).
  static Value get(const Root& root) {
    if constexpr (NamedEnum<T>) return Value(std::string(name_of(ref(root))));
    else return Value(ref(root));
  }
  static void set(Root& root, const Value& value) {
    if constexpr (NamedEnum<T>) {
      const std::string& name = std::get<std::string>(value);
      const auto parsed = enum_from_name<T>(name);
      if (!parsed) throw std::invalid_argument("not one of its names: \"" + name + "\"");
      ref(root) = *parsed;
    } else {
      ref(root) = std::get<T>(value);
    }
  }
  // An enum field's names, its allowed values.
  static Constraint constraint_of(Constraint constraint) {
    if constexpr (NamedEnum<T>)
      constraint.allowed.assign(EnumNames<T>::names.begin(), EnumNames<T>::names.end());
    return constraint;
  }

  static Type type(const Constraint& constraint) {
    if constexpr (NamedEnum<T>) {
      return Type::Enum;
    } else if constexpr (std::is_same_v<T, int64_t>) {
      return Type::Int;
    } else if constexpr (std::is_same_v<T, double>) {
      return Type::Float;
    } else if constexpr (std::is_same_v<T, bool>) {
      return Type::Bool;
    } else {
      static_assert(std::is_same_v<T, std::string>, "config fields: int64_t, double, bool, string");
      return constraint.allowed.empty() ? Type::String : Type::Enum;
    }
  }
};

template <class Root, auto... Members>
Key<Root> make(std::string_view name, Constraint constraint, std::string_view description) {
  using F = Field<Root, Members...>;
  constraint = F::constraint_of(std::move(constraint));
  Type type = F::type(constraint);
  return {{name, type, std::move(constraint), description}, &F::get, &F::set};
}

template <auto Section, auto Member>
Key<JobConfig> job(std::string_view name, Constraint constraint, std::string_view description) {
  return make<JobConfig, Section, Member>(name, std::move(constraint), description);
}

template <auto Member>
Key<FaultSpec> fault(std::string_view name, Constraint constraint,
                     std::string_view description) {
  return make<FaultSpec, Member>(name, std::move(constraint), description);
}

using J = JobConfig;
using Mo = ModelConfig;
using Tr = TrainConfig;
using Da = DataConfig;
using Cl = ClusterConfig;
using El = ElasticConfig;
using Pa = ParallelConfig;
using Co = CommConfig;
using Ck = CheckpointConfig;
using Me = MetricsConfig;
using Fa = FaultSpec;
using Pr = PrepareConfig;

template <auto Member>
Key<PrepareConfig> prep(std::string_view name, Constraint constraint,
                        std::string_view description) {
  return make<PrepareConfig, Member>(name, std::move(constraint), description);
}

std::string format_number(double value) {
  std::array<char, 64> buffer{};
  auto end = std::to_chars(buffer.data(), buffer.data() + buffer.size(), value).ptr;
  return std::string(buffer.data(), end);
}

}  // namespace

Constraint any() { return {}; }
Constraint at_least(double lo) { return {Range{.lo = lo}, {}}; }
Constraint above(double lo) { return {Range{.lo = lo, .lo_open = true}, {}}; }
Constraint between(double lo, double hi) { return {Range{.lo = lo, .hi = hi}, {}}; }
Constraint half_open(double lo, double hi) {
  return {Range{.lo = lo, .hi = hi, .hi_open = true}, {}};
}
Constraint open_closed(double lo, double hi) {
  return {Range{.lo = lo, .hi = hi, .lo_open = true}, {}};
}
Constraint one_of(std::vector<std::string_view> allowed) { return {Range{}, std::move(allowed)}; }
Constraint names() { return {}; }

const std::vector<Key<JobConfig>>& job_keys() {
  static const std::vector<Key<JobConfig>> keys = {
      job<&J::model, &Mo::dim>("model.dim", at_least(1), "width of the residual stream (C)"),
      job<&J::model, &Mo::layers>("model.layers", at_least(1), "transformer blocks (L)"),
      job<&J::model, &Mo::heads>("model.heads", at_least(1),
                                 "attention heads (NH); model.dim must be divisible by it"),
      job<&J::model, &Mo::context>("model.context", at_least(1),
                                   "tokens per sequence (T), also the size of the position table"),
      job<&J::model, &Mo::vocab>("model.vocab", at_least(1),
                                 "token ids in [0, vocab); 256 for the byte-level tokenizer"),
      job<&J::model, &Mo::init_std>("model.init_std", above(0),
                                    "standard deviation of the normal weight init (GPT-2)"),
      job<&J::model, &Mo::recompute>(
          "model.recompute", any(),
          "activation recompute: \"none\", or \"every:N\" (N >= 1): blocks 0, N, 2N, ... of "
          "each model range (a pipeline stage's) keep only their input after forward and "
          "run their forward again in backward; \"every:1\" = every block (least memory). "
          "Gradients are bitwise those of \"none\""),

      job<&J::train, &Tr::batch_size>("train.batch_size", at_least(1),
                                      "sequences per optimizer step, whole job"),
      job<&J::train, &Tr::micro_batch_size>(
          "train.micro_batch_size", at_least(0),
          "sequences per forward/backward; 0 = batch_size; must divide train.batch_size"),
      job<&J::train, &Tr::steps>("train.steps", at_least(0), "optimizer steps"),
      job<&J::train, &Tr::seed>("train.seed", any(), "seeds the weights and the sample order"),
      job<&J::train, &Tr::threads>("train.threads", between(0, 1024),
                                   "compute threads per node; 0 = all cores"),
      job<&J::train, &Tr::lr>("train.lr", above(0), "peak learning rate"),
      job<&J::train, &Tr::min_lr>("train.min_lr", at_least(0),
                                  "learning rate at the end of the cosine decay; <= train.lr"),
      job<&J::train, &Tr::warmup_steps>("train.warmup_steps", at_least(0),
                                        "steps of linear warm-up from 0 to train.lr"),
      job<&J::train, &Tr::weight_decay>(
          "train.weight_decay", at_least(0),
          "decoupled (AdamW) weight decay; applied to matrices and embeddings only"),
      job<&J::train, &Tr::beta1>("train.beta1", half_open(0, 1),
                                 "AdamW decay rate of the gradient mean (first moment)"),
      job<&J::train, &Tr::beta2>("train.beta2", half_open(0, 1),
                                 "AdamW decay rate of the squared-gradient mean (second moment)"),
      job<&J::train, &Tr::eps>("train.eps", above(0),
                               "AdamW term added to the denominator for numerical safety"),
      job<&J::train, &Tr::grad_clip>("train.grad_clip", at_least(0),
                                     "global gradient norm limit; 0 = off"),
      job<&J::train, &Tr::eval_every>("train.eval_every", at_least(0),
                                      "steps between validation passes; 0 = only at the end"),
      job<&J::train, &Tr::eval_batches>("train.eval_batches", at_least(1),
                                        "validation batches of train.batch_size sequences"),
      job<&J::train, &Tr::precision>(
          "train.precision", names(),
          "precision of the matmuls (fp32 accumulate, fp32 master weights and optimizer "
          "state, softmax and cross-entropy in fp32): fp32; bf16 (every matmul, the head's "
          "and attention's products included; no loss scaling); fp8 (the transformer blocks' matmuls: E4M3 inputs and "
          "weights, E5M2 gradients, delayed per-tensor scaling, dynamic loss scaling; the "
          "head in bf16, attention in fp32)"),
      job<&J::train, &Tr::fp8_amax_history>(
          "train.fp8_amax_history", between(1, 1024),
          "fp8: steps of amax history per tensor; the scale of a step is fp8_max / "
          "max(history of the earlier steps) / 2^train.fp8_margin"),
      job<&J::train, &Tr::fp8_margin>("train.fp8_margin", between(0, 16),
                                      "fp8: headroom of the delayed scaling, in powers of two"),
      job<&J::train, &Tr::loss_scale_init>(
          "train.loss_scale_init", between(1, 16777216),
          "fp8: initial dynamic loss scale, a power of two; halved on a step with non-finite "
          "gradients (the step is skipped)"),
      job<&J::train, &Tr::loss_scale_window>(
          "train.loss_scale_window", at_least(1),
          "fp8: steps without overflow after which the loss scale doubles"),
      job<&J::train, &Tr::device>(
          "train.device", names(),
          "where each worker computes: cpu, or cuda (CUDA device 0 of the node; a build "
          "without CUDA or a host without a device fails at start); scrambled-cpu-for-tests "
          "is a TEST device, the CPU behind memory the host cannot read directly"),
      job<&J::train, &Tr::offload>(
          "train.offload", names(),
          "where AdamW and its moments live: optimizer = on the host CPU, in dseek-node's "
          "gradient_shard actors (on a GPU the parameters and gradients cross PCIe every "
          "step); none = on the training device (the trainer's own AdamW); auto = the "
          "shards on the cpu device, the device on cuda"),
      job<&J::train, &Tr::offload_overlap>(
          "train.offload_overlap", any(),
          "with the optimizer offloaded to the CPU (train.offload, dseek-node's "
          "gradient_shard actors) and "
          "parallel.zero = 0: the update runs chunk by chunk in layout order (embeddings, "
          "block 0, 1, ..., final LayerNorm), each chunk goes back to the device as soon as "
          "it is updated, and the next step's forward waits only for the chunk it reads "
          "(the step event's offload_wait_ms); the same bits as false, which finishes the "
          "update before the step ends"),
      job<&J::train, &Tr::run_dir>("train.run_dir", any(),
                                   "directory the run's events and outputs go under"),
      job<&J::train, &Tr::stop_after_steps>(
          "train.stop_after_steps", at_least(0),
          "end the run after this many steps of this invocation (a resumed run counts from "
          "its checkpoint) with a checkpoint to resume from; 0 = off"),
      job<&J::train, &Tr::stop_after_minutes>(
          "train.stop_after_minutes", at_least(0),
          "end the run at the first step boundary after this many minutes, with a "
          "checkpoint; 0 = off"),

      job<&J::train, &Tr::replica_check_every>(
          "train.replica_check_every", at_least(0),
          "with data-parallel replicas (in every layout): steps between comparisons of the "
          "replicas' checksums (of the "
          "reduced gradients under ZeRO 0, and of the parameters); a replica that disagrees "
          "with the majority (with two, with rank 0) is reported (sdc_detected) and leaves "
          "the job; 0 = off"),
      job<&J::train, &Tr::sdc_audit_every>(
          "train.sdc_audit_every", at_least(0),
          "with three or more data-parallel replicas: steps between audits of their own "
          "gradients (silent data corruption before the reduction, which the replica check "
          "cannot see): each replica recomputes another's slice of the step and compares "
          "checksums; a replica two auditors find wrong is reported (sdc_detected) and "
          "evicted; each audit costs one extra forward and backward; 0 = off"),

      job<&J::data, &Da::dir>("data.dir", any(),
                              "directory of token shards written by `dseek data prepare`"),
      // Bounded: each step ahead holds a step of batches in memory (1e8 grew the
      // prefetcher to 4.2 GB before it failed); a few steps hide any read.
      job<&J::data, &Da::prefetch>("data.prefetch", between(0, 1024),
                                   "steps of batches kept ready ahead of the worker while "
                                   "steps compute (dseek-node: by the node's data_prefetcher "
                                   "actor); 0 = on demand"),
      job<&J::data, &Da::balance>("data.balance", names(),
                                  "the global batch over the data-parallel replicas: equal "
                                  "slices, or throughput: whole micro-batches "
                                  "(train.micro_batch_size) in proportion to each replica's "
                                  "measured speed, so the batch need not divide by the nodes"),
      job<&J::data, &Da::rebalance_every>("data.rebalance_every", between(1, 1000000),
                                          "data.balance = \"throughput\": steps between "
                                          "re-sharings of the batch by the speeds measured "
                                          "since the last"),

      job<&J::cluster, &Cl::nodes>("cluster.nodes", at_least(1), "nodes in the job"),
      job<&J::cluster, &Cl::node_id>("cluster.node_id", at_least(0),
                                     "this node's id, 0 .. cluster.nodes - 1"),
      job<&J::cluster, &Cl::gpus_per_node>(
          "cluster.gpus_per_node", between(1, 64),
          "worker groups (ranks of the world) one node runs, one per local device: GPUs 0 .. "
          "G-1 with train.device = \"cuda\"; G ranks sharing the host's cores on the CPU "
          "devices. World size = cluster.nodes x G, node k holding ranks kG .. kG+G-1: a "
          "data-parallel job's replicas (parallel.data left at 1), or the parallel.data x "
          "parallel.pipeline x parallel.tensor ranks of a pipeline or tensor-parallel job "
          "(their product must equal the world; tensor groups stay inside a node when "
          "parallel.tensor divides G)"),
      job<&J::cluster, &Cl::coordinator>("cluster.coordinator", any(),
                                         "host:port of the coordinator node"),
      job<&J::cluster, &Cl::coordinator_node>("cluster.coordinator_node", at_least(0),
                                              "the node id that runs the coordinator"),
      job<&J::cluster, &Cl::backup_coordinators>(
          "cluster.backup_coordinators", any(),
          "coordinator failover: \"NODE@HOST:PORT ...\" (spaces or commas between "
          "entries), in order of succession; when the coordinator's node is lost, the "
          "survivors move the coordinator to the next live entry (node NODE runs it at "
          "HOST:PORT). With any entry, a coordinator forms epochs only with a majority of "
          "cluster.nodes (a minority stops training until it reaches the majority again: "
          "no split brain). \"\" = no failover: the job waits for the coordinator's node "
          "to come back"),
      job<&J::cluster, &Cl::advertise_host>("cluster.advertise_host", any(),
                                            "this node's address as its peers reach it"),
      job<&J::cluster, &Cl::secret>(
          "cluster.secret", any(),
          "shared join secret (HMAC challenge-response, never sent); \"\" = the environment "
          "variable DSEEK_CLUSTER_SECRET. Never written to checkpoints or `config --check`"),
      job<&J::cluster, &Cl::heartbeat_interval_ms>("cluster.heartbeat_interval_ms",
                                                   at_least(10), "heartbeat period"),
      job<&J::cluster, &Cl::heartbeat_timeout_ms>(
          "cluster.heartbeat_timeout_ms", at_least(50),
          "a node without heartbeat this long is declared lost (hung)"),
      job<&J::cluster, &Cl::join_retries>("cluster.join_retries", at_least(0),
                                          "retries of connecting to the coordinator"),
      job<&J::cluster, &Cl::join_retry_delay_ms>("cluster.join_retry_delay_ms", at_least(1),
                                                 "pause between join attempts"),
      job<&J::cluster, &Cl::connect_timeout_ms>("cluster.connect_timeout_ms", at_least(1),
                                                "limit of one connect or handshake step"),
      job<&J::cluster, &Cl::start_timeout_s>(
          "cluster.start_timeout_s", at_least(1),
          "training starts when all cluster.nodes joined; fail if that takes longer"),
      job<&J::cluster, &Cl::max_restarts>(
          "cluster.max_restarts", at_least(0),
          "`dseek launch` restarts a local node that died this many times"),
      job<&J::cluster, &Cl::tls_ca>("cluster.tls_ca", any(),
                                    "PEM file of the cluster CA; \"\" = no TLS"),
      job<&J::cluster, &Cl::tls_cert>("cluster.tls_cert", any(),
                                      "this node's PEM certificate, signed by tls_ca"),
      job<&J::cluster, &Cl::tls_key>("cluster.tls_key", any(), "PEM private key of tls_cert"),
      job<&J::cluster, &Cl::plaintext>(
          "cluster.plaintext", any(),
          "false = a node whose coordinator or advertised address is not loopback refuses "
          "to start without TLS (cluster.tls_*); true = the control plane runs in plain text "
          "anyway (a warning at start)"),

      job<&J::elastic, &El::rejoin_seconds>(
          "elastic.rejoin_seconds", at_least(0),
          "after a node loss, wait this long for the node to come back before continuing "
          "without it"),
      job<&J::elastic, &El::min_nodes>(
          "elastic.min_nodes", at_least(0),
          "consent to shrink: the job may go on and finish with this many nodes or more "
          "(fewer: it fails); 0 = no consent, a job that finishes with fewer than "
          "cluster.nodes ends with exit 3"),
      job<&J::elastic, &El::shard_replica>(
          "elastic.shard_replica", any(),
          "under parallel.zero >= 1, every node keeps a copy of its ring neighbour's "
          "optimizer shard after each step (sent over the data plane), so a lost node's "
          "state is rebuilt from memory; false = recover from the newest checkpoint only"),

      job<&J::parallel, &Pa::data>(
          "parallel.data", at_least(1),
          "data-parallel replicas; 1 = one per node of the world (a world that shrinks after "
          "a node loss keeps training with fewer); otherwise parallel.data x "
          "parallel.pipeline x parallel.tensor must equal cluster.nodes (replicas of a "
          "pipeline or of a tensor-parallel group, each on its slice of the batch)"),
      job<&J::parallel, &Pa::tensor>("parallel.tensor", at_least(1),
                                     "tensor-parallel ranks per replica (per pipeline "
                                     "stage with parallel.pipeline > 1)"),
      job<&J::parallel, &Pa::pipeline>("parallel.pipeline", at_least(1),
                                       "pipeline stages per replica"),
      job<&J::parallel, &Pa::schedule>(
          "parallel.schedule", names(),
          "pipeline schedule: gpipe (all forwards, then all backwards), 1f1b (activations "
          "of at most parallel.pipeline micro-batches per stage), interleaved (1f1b over "
          "parallel.virtual_stages model chunks per stage: a smaller bubble)"),
      job<&J::parallel, &Pa::virtual_stages>(
          "parallel.virtual_stages", at_least(1),
          "model chunks per pipeline stage; >= 2 with parallel.schedule = \"interleaved\", "
          "1 otherwise"),
      job<&J::parallel, &Pa::micro_batches>(
          "parallel.micro_batches", at_least(0),
          "micro-batches per step in each pipeline replica; 0 = train.batch_size / "
          "parallel.data / train.micro_batch_size"),
      job<&J::parallel, &Pa::partition>(
          "parallel.partition", names(),
          "how blocks are split into pipeline stages: uniform (equal block counts) or "
          "balanced (a profiling pass measures the embedding, each block and the head; the "
          "split minimizes the slowest stage)"),
      job<&J::parallel, &Pa::zero>(
          "parallel.zero", between(0, 2),
          "ZeRO stage: 0 = off, 1 = shard optimizer state, 2 = and gradients; pipeline "
          "and tensor-parallel jobs shard each stage's (tensor rank's) optimizer over its "
          "data group (parallel.data > 1), reducing after backward for both stages"),

      job<&J::comm, &Co::backend>("comm.backend", names(),
                                  "the data plane of GPU memory: ucx (staged through host memory) "
                                  "or nccl (gradients, tensor all-reduces and the stages' "
                                  "activations in GPU memory; train.device = \"cuda\")"),
      job<&J::comm, &Co::timeout_ms>("comm.timeout_ms", at_least(100),
                                     "limit of one collective; a dead peer fails it sooner"),
      job<&J::comm, &Co::compression>("comm.compression",
                                      names(),
                                      "gradient compression on the data plane"),
      job<&J::comm, &Co::topk_fraction>("comm.topk_fraction", open_closed(0, 1),
                                        "fraction of gradient entries kept by topk"),
      job<&J::comm, &Co::compression_warmup_steps>(
          "comm.compression_warmup_steps", at_least(0),
          "steps reduced uncompressed before comm.compression starts (the optimizer's "
          "moments settle on whole gradients first; as 1-bit Adam's warm-up)"),
      job<&J::comm, &Co::variance_refresh_steps>(
          "comm.variance_refresh_steps", at_least(0),
          "with comm.compression: AdamW's second moment is each replica's running average "
          "of its own dense squared gradients, averaged across replicas (bf16) every this "
          "many steps and fixed in between; 0 = from the compressed gradients"),
      job<&J::comm, &Co::compressed_beta1>(
          "comm.compressed_beta1", half_open(0, 1),
          "AdamW's beta1 (instead of train.beta1) on the compressed steps when the second "
          "moment comes from local gradients (comm.variance_refresh_steps > 0): error "
          "feedback already carries unsent gradient forward, so less momentum on top"),

      job<&J::checkpoint, &Ck::every_steps>("checkpoint.every_steps", at_least(0),
                                            "steps between checkpoints; 0 = none"),
      job<&J::checkpoint, &Ck::dir>("checkpoint.dir", any(),
                                    "checkpoint directory; empty = RUN_DIR/checkpoints"),
      job<&J::checkpoint, &Ck::keep_last>("checkpoint.keep_last", at_least(1),
                                          "newest checkpoints kept; older ones are deleted"),
      job<&J::checkpoint, &Ck::resume>(
          "checkpoint.resume", any(),
          "\"\" = start fresh, \"latest\" = newest committed checkpoint that verifies (none: "
          "start fresh), or a checkpoint directory"),
      job<&J::checkpoint, &Ck::async>(
          "checkpoint.async", any(),
          "write checkpoints on a background thread while training goes on; false = the "
          "step waits for the write"),

      job<&J::metrics, &Me::log_every>("metrics.log_every", at_least(1),
                                       "steps between plain log lines"),
      job<&J::metrics, &Me::progress>(
          "metrics.progress", names(),
          "progress output: auto = a bar on a terminal and plain lines otherwise"),
      job<&J::metrics, &Me::prometheus_port>(
          "metrics.prometheus_port", between(0, 65535),
          "base port of the Prometheus /metrics endpoint: node K listens on this port + "
          "cluster.node_id, so that several nodes on one host do not collide (unless "
          "metrics.prometheus_port_per_node is false); 0 = none"),
      job<&J::metrics, &Me::prometheus_port_per_node>(
          "metrics.prometheus_port_per_node", any(),
          "true: node K serves /metrics on metrics.prometheus_port + K; false: every node on "
          "metrics.prometheus_port itself, for one node per host or pod (Kubernetes, whose "
          "scrape annotation names one port)"),
      job<&J::metrics, &Me::prometheus_host>(
          "metrics.prometheus_host", any(),
          "address the /metrics endpoint listens on: loopback by default; 0.0.0.0 = every "
          "interface (a scraper on another host, a pod's PodMonitor)"),
      job<&J::metrics, &Me::prometheus_linger_seconds>(
          "metrics.prometheus_linger_seconds", between(0, 3600),
          "seconds a node keeps serving /metrics after its training ended, so that a last "
          "scrape sees the final values (SIGINT/SIGTERM ends the wait)"),
      job<&J::metrics, &Me::peak_flops>(
          "metrics.peak_flops", at_least(0),
          "peak FLOP/s of one worker group's device, the denominator of MFU; 0 = measured at "
          "start on CPU (fp32 GEMM), none on CUDA (no MFU)"),
      job<&J::metrics, &Me::device_memory_bytes>(
          "metrics.device_memory_bytes", at_least(0),
          "memory of one worker group's device, the denominator of memory_fraction; 0 = the "
          "host's memory on CPU, none on CUDA"),
      job<&J::metrics, &Me::baseline_tokens_per_s>(
          "metrics.baseline_tokens_per_s", at_least(0),
          "tokens/s of the job on one node, the denominator of scaling_efficiency; 0 = the "
          "median of metrics.baseline_run's steps, or none"),
      job<&J::metrics, &Me::baseline_run>(
          "metrics.baseline_run", any(),
          "run directory of a one-node run of the same model whose step events are the "
          "baseline (when metrics.baseline_tokens_per_s is 0); \"\" = none"),
  };
  return keys;
}

const std::vector<Key<FaultSpec>>& fault_keys() {
  static const std::vector<Key<FaultSpec>> keys = {
      fault<&Fa::kind>("faults.kind",
                       names(),
                       "what to inject (see the list of kinds below)"),
      fault<&Fa::node>("faults.node", at_least(-1), "node it applies to; -1 = every node"),
      fault<&Fa::step>("faults.step", at_least(-1), "fire at this step; -1 = use after_seconds"),
      fault<&Fa::after_seconds>("faults.after_seconds", at_least(-1),
                                "fire after this many seconds; -1 = use step"),
      fault<&Fa::seconds>("faults.seconds", at_least(-1), "hang: duration; -1 = forever"),
      fault<&Fa::fraction>("faults.fraction", between(0, 1),
                           "drop_messages: fraction of messages dropped"),
      fault<&Fa::ms>("faults.ms", at_least(0), "slow: extra milliseconds per step"),
      fault<&Fa::actor>("faults.actor", any(),
                        "crash_actor: name of the actor to crash (\"node\": the node "
                        "actor and its whole tree); \"worker@1\", "
                        "\"gradient_shard@1\", \"data_prefetcher@1\", "
                        "\"pipeline_stage@1\": that actor of local rank 1's worker group "
                        "(cluster.gpus_per_node > 1)"),
      fault<&Fa::during>("faults.during", names(),
                         "kill and hang at a step: at its start, or once its first gradient "
                         "bucket is on the wire (the peers are mid-collective)"),
      fault<&Fa::where>("faults.where", names(),
                        "corrupt_gradient: the reduced gradient (\"reduced\": every replica's "
                        "differs from the others', the replica check finds it) or this "
                        "node's own before the reduction (\"local\": it poisons every "
                        "replica's sum alike, as a faulty GPU does; the SDC audit finds it) "
                        "or only this node's recomputations for the SDC audit (\"audit\": a "
                        "wrong auditor, which a second auditor clears)"),
      fault<&Fa::every_step>("faults.every_step", any(),
                             "corrupt_gradient: at `step` and every step after (a node that "
                             "is always wrong) instead of once"),
  };
  return keys;
}

const std::vector<Key<PrepareConfig>>& prepare_keys() {
  static const std::vector<Key<PrepareConfig>> keys = {
      prep<&Pr::input>("prepare.input", any(),
                       "the input: a directory (walked recursively), a file or a glob; \"\" = "
                       "give --input"),
      prep<&Pr::tokenizer>("prepare.tokenizer", any(),
                           "bytes, gpt2 = r50k_base, cl100k_base, a .tiktoken file or a "
                           "SentencePiece .model file"),
      prep<&Pr::val_fraction>("prepare.val_fraction", half_open(0, 1),
                              "share of the tokens for validation; 0 = none"),
      prep<&Pr::jsonl_field>("prepare.jsonl_field", any(),
                             "the text field of a JSON Lines record (not empty)"),
      prep<&Pr::text_separator>("prepare.text_separator", any(),
                                "the bytes between the documents of a text file (its blank "
                                "ones skipped); \"\" = a text file is one document"),
      prep<&Pr::strict>("prepare.strict", any(),
                        "a damaged file or malformed record is an error instead of skipped "
                        "and counted"),
      prep<&Pr::include>("prepare.include", any(),
                         "globs of the files taken, separated by commas; \"\" = every file "
                         "(a hidden or version-control file needs one)"),
      prep<&Pr::exclude>("prepare.exclude", any(),
                         "globs of the files left out, separated by commas"),
      prep<&Pr::shard_tokens>("prepare.shard_tokens", at_least(1), "tokens per shard file"),
      prep<&Pr::max_bytes>("prepare.max_bytes", at_least(0),
                           "stop after this many bytes of text; 0 = all"),
      prep<&Pr::workers>("prepare.workers", between(0, 1024),
                         "actors per pool stage (decode, clean, tokenize, augment); 0 = the "
                         "cores"),
      prep<&Pr::window>("prepare.window", at_least(0),
                        "most pieces between reading and writing (the credit window); 0 = 4 "
                        "per worker, at least 8; else at least 2"),
      prep<&Pr::piece_bytes>("prepare.piece_bytes", at_least(1),
                             "text bytes per piece (a larger document is a piece of its own)"),
      prep<&Pr::cache>("prepare.cache", any(),
                       "folder of the content-addressed cache of finished files; \"\" = none"),
      prep<&Pr::progress>("prepare.progress", any(), "a progress line per second on the log"),
      prep<&Pr::repair_utf8>("prepare.repair_utf8", any(),
                             "invalid UTF-8 replaced by U+FFFD (false: the bytes as they are, "
                             "for the byte tokenizer)"),
      prep<&Pr::nfc>("prepare.nfc", any(), "Unicode NFC of every document"),
      prep<&Pr::exact_dedup>("prepare.exact_dedup", any(), "drop a text seen before (XXH3-128)"),
      prep<&Pr::near_dedup>("prepare.near_dedup", any(),
                            "drop a text close to one seen before (MinHash + LSH)"),
      prep<&Pr::near_threshold>("prepare.near_threshold", open_closed(0, 1),
                                "Jaccard similarity of word shingles from which a text is a "
                                "near duplicate"),
      prep<&Pr::minhash_permutations>("prepare.minhash_permutations", between(1, 1024),
                                      "MinHash permutations"),
      prep<&Pr::shingle_words>("prepare.shingle_words", between(1, 1 << 20), "words per shingle"),
      prep<&Pr::min_chars>("prepare.min_chars", at_least(0),
                           "fewer code points is too_short; 0 = off"),
      prep<&Pr::max_chars>("prepare.max_chars", at_least(0),
                           "more code points is too_long; 0 = off"),
      prep<&Pr::max_symbol_ratio>("prepare.max_symbol_ratio", between(0, 1),
                                  "largest share of symbols (neither letters nor digits) of the "
                                  "non-space characters; 1 = off"),
      prep<&Pr::max_digit_ratio>("prepare.max_digit_ratio", between(0, 1),
                                 "largest share of digits of the non-space characters; 1 = off"),
      prep<&Pr::max_repeated_lines>("prepare.max_repeated_lines", between(0, 1),
                                    "largest share of the lines that repeat an earlier one; 1 = "
                                    "off"),
      prep<&Pr::fim_rate>("prepare.fim_rate", between(0, 1),
                          "share of the documents rearranged for fill-in-the-middle; 0 = off"),
      prep<&Pr::fim_spm_rate>("prepare.fim_spm_rate", between(0, 1),
                              "of those, the share in SPM order (else PSM)"),
      prep<&Pr::fim_seed>("prepare.fim_seed", at_least(0),
                          "seed of the fill-in-the-middle choices and cuts"),
  };
  return keys;
}

const std::vector<Section>& sections() {
  static const std::vector<Section> list = {
      {"model", "The GPT architecture."},
      {"train", "The optimizer, its schedule, and where the run writes."},
      {"data", "The token shards the job trains on."},
      {"prepare",
       "How `dseek data prepare --config FILE` makes the shards of data.dir (its flags win); "
       "training leaves this section alone."},
      {"cluster", "The nodes of the job and how they find each other."},
      {"elastic", "What the job does when it loses a node."},
      {"parallel", "How the batch and the model are split across ranks."},
      {"comm", "The data plane that moves tensors between ranks."},
      {"checkpoint", "Saving training state to resume from."},
      {"metrics", "Progress output and metrics export."},
      {"faults",
       "Deterministic faults to inject, to test recovery: one `[[faults]]` table per fault."},
  };
  return list;
}

bool is_section(std::string_view name) {
  return std::any_of(sections().begin(), sections().end(),
                     [&](const Section& section) { return section.name == name; });
}

std::optional<std::string> check(const Spec& spec, const Value& value) {
  if (spec.type == Type::Enum) {
    const auto& text = std::get<std::string>(value);
    const auto& allowed = spec.constraint.allowed;
    if (std::find(allowed.begin(), allowed.end(), text) != allowed.end()) return std::nullopt;
    return "expected one of " + describe_constraint(spec) + ", got " + quote(text);
  }
  double number = 0;
  if (spec.type == Type::Int) {
    number = static_cast<double>(std::get<int64_t>(value));
  } else if (spec.type == Type::Float) {
    number = std::get<double>(value);
    // A NaN would pass every comparison below; inf is never a meaningful setting.
    if (!std::isfinite(number)) return "expected a finite number, got " + format_value(value);
  } else {
    return std::nullopt;
  }
  const Range& range = spec.constraint.range;
  bool low_ok = range.lo_open ? number > range.lo : number >= range.lo;
  bool high_ok = range.hi_open ? number < range.hi : number <= range.hi;
  if (low_ok && high_ok) return std::nullopt;
  return "must be " + describe_constraint(spec) + ", got " + format_value(value);
}

std::string_view type_name(Type type) {
  switch (type) {
    case Type::Int: return "int";
    case Type::Float: return "float";
    case Type::String: return "string";
    case Type::Bool: return "bool";
    case Type::Enum: return "enum";
  }
  return "?";
}

std::string format_value(const Value& value) {
  if (const auto* integer = std::get_if<int64_t>(&value)) return std::to_string(*integer);
  if (const auto* flag = std::get_if<bool>(&value)) return *flag ? "true" : "false";
  if (const auto* text = std::get_if<std::string>(&value)) return quote(*text);
  double number = std::get<double>(value);
  if (std::isnan(number)) return "nan";
  if (std::isinf(number)) return number > 0 ? "inf" : "-inf";
  // Shortest round-trip digits; TOML reads "256" as an integer, so keep floats floats.
  std::string text = format_number(number);
  auto exponent = text.find('e');
  if (exponent == std::string::npos) {
    if (text.find('.') == std::string::npos) text += ".0";
    return text;
  }
  // to_chars writes "1e-08" and "1e+20"; "1e-8" and "1e20" read better and are equal TOML.
  size_t digits = exponent + 1;
  if (text[digits] == '+') {
    text.erase(digits, 1);
  } else if (text[digits] == '-') {
    ++digits;
  }
  while (digits + 1 < text.size() && text[digits] == '0') text.erase(digits, 1);
  return text;
}

// TOML basic strings escape as JSON strings do (the control characters, quote and
// backslash), so one function serves both.
std::string quote(std::string_view text) { return util::json_quote(text); }

std::string describe_constraint(const Spec& spec) {
  std::string out;
  if (spec.type == Type::Enum) {
    for (auto allowed : spec.constraint.allowed) {
      if (!out.empty()) out += ", ";
      out += allowed;
    }
    return out;
  }
  const Range& range = spec.constraint.range;
  if (std::isfinite(range.lo)) out = (range.lo_open ? "> " : ">= ") + format_number(range.lo);
  if (std::isfinite(range.hi)) {
    if (!out.empty()) out += " and ";
    out += (range.hi_open ? "< " : "<= ") + format_number(range.hi);
  }
  return out;
}

}  // namespace dseek::config::schema
