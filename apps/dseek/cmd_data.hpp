// The actions of `dseek data` that live in files of their own (cmd_data.cpp dispatches).
#pragma once

#include "dseek/commands.hpp"

namespace dseek::tool {

// data tokenize --tokenizer NAME|FILE [--decode] [--stats]: stdin to ids (or back).
int cmd_data_tokenize(const Args& args);

}  // namespace dseek::tool
