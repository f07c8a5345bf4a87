// The actions of `dseek data` that live in files of their own (cmd_data.cpp dispatches).
#pragma once

#include "dseek/commands.hpp"
#include "runtime/data/prepare.hpp"

namespace dseek::tool {

// data tokenize --tokenizer NAME|FILE [--decode] [--stats]: stdin to ids (or back).
int cmd_data_tokenize(const Args& args);

// The options of `data prepare ARGS...` (args[0] is "prepare"), as that action runs
// them; also what `dseek launch --nodes N data prepare ...` checks before it starts
// the nodes. Throws cli::UsageError (or a config error from --config) with what is wrong.
data::PrepareOptions prepare_options_from_args(const Args& args);

}  // namespace dseek::tool
