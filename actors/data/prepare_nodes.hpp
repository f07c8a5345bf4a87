// `dseek data prepare --nodes N --node-id I`: this node's share of a preparation on N
// nodes that see the same output folder (runtime/data/prepare_nodes.hpp has the
// exchange). Every node runs the pipeline's decode, clean, tokenize and augment stages
// on its files (their index modulo N is I) and writes each file's part to
// OUTPUT/.parts; every node decides its share of exact dedup (a hash partition) and of
// near dedup's candidate search (LSH bands); node 0 then waits for every share, decides
// and writes the parts in corpus order: the shards and the index of a one-node run,
// byte for byte. A rerun reuses every part already written (a node that died loses only
// its unfinished files). Node 0 fails naming a node that failed, runs with other
// settings or has not delivered within options.node_wait_s; the parts stay for the
// rerun.
#pragma once

#include <ostream>

#include "runtime/data/prepare.hpp"

namespace dseek::actors {

data::PrepareSummary prepare_on_nodes(const data::PrepareOptions& options, std::ostream& log);

}  // namespace dseek::actors
