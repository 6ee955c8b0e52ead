// The data plane's half of the codec (protocol version 2): one validating function per body of
// pb::Data (data_codec.cc). Used by codec.cc (and the codec's tests); the rest of zps calls
// wire::decode and the encoders in codec.h.
#pragma once

#include <string>
#include <vector>

#include "ps/wire/codec.h"

namespace zps::wire::detail {

// Validates a data message's body against its frames (frames[0] is the envelope) and fills `msg`:
// data, dtype, keys, payload, and for Fused its entries (moved out of msg.data's body). On failure
// msg.data holds the message as received, for an error reply.
Status decodeData(pb::Data data, const std::vector<Blob>& frames, const Limits& limits, DataMessage& msg);

// A peer's text must fit limits.max_string_bytes; `field` names it in the refusal.
Status checkString(const std::string& field, const std::string& value, const Limits& limits);

}  // namespace zps::wire::detail
