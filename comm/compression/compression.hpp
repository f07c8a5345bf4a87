// Everything of the gradient compression codecs: the Codec interface and make_codec, the
// four codecs, ErrorFeedback and the byte counters. See codec.hpp for the wire format.
#pragma once

#include "comm/compression/codec.hpp"
#include "comm/compression/error_feedback.hpp"
#include "comm/compression/int8_codec.hpp"
#include "comm/compression/topk_codec.hpp"
#include "comm/compression/topk_int8_codec.hpp"
#include "comm/compression/traffic_counters.hpp"
