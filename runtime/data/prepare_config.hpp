// `dseek data prepare --config FILE`: the preparation's options from a job config's
// [prepare] section (runtime/config/prepare_config.hpp), the output the job's data.dir,
// so that one file says how the data set is made and what trains on it. The command
// line's flags are applied after, and win.
#pragma once

#include "runtime/config/prepare_config.hpp"
#include "runtime/data/prepare.hpp"

namespace dseek::data {

// The options of the [prepare] section; output = data.dir. The config was validated
// (config::load_prepare_job), so every value is in range.
PrepareOptions prepare_options_from_config(const config::PrepareJob& config);

}  // namespace dseek::data
