#include "server/replies.h"

#include "ps/common/process_stats.h"
#include "ps/wire/codec.h"

namespace zps {
namespace {

// The dtype a request names (0, float32, for rows and for requests without one).
uint32_t dtypeOf(const pb::Data& request) {
  switch (request.body_case()) {
    case pb::Data::kTensor: return request.tensor().dtype();
    case pb::Data::kDeclare: return request.declare().dtype();
    default: return 0;
  }
}

}  // namespace

Outgoing statsReply(PeerId peer, const pb::Data& request, const std::vector<SumCounts*>& counts) {
  uint64_t pushed = 0, summed = 0, sum_ns = 0;
  for (SumCounts* c : counts) {
    c->timed.store(true, std::memory_order_relaxed);
    pushed += c->pushed_bytes.load(std::memory_order_relaxed);
    summed += c->summed_bytes.load(std::memory_order_relaxed);
    sum_ns += c->sum_ns.load(std::memory_order_relaxed);
  }
  Outgoing o;
  o.peer = peer;
  o.data.set_request_id(request.request_id());
  pb::StatsReply* stats = o.data.mutable_stats_reply();
  stats->set_cpu_ns(processCpuNanos());
  stats->set_peak_rss_bytes(peakRssBytes());
  stats->set_pushed_bytes(pushed);
  stats->set_summed_bytes(summed);
  stats->set_sum_ns(sum_ns);
  return o;
}

Outgoing replyTo(PeerId peer, const pb::Data& request) {
  Outgoing o;
  o.peer = peer;
  o.data.set_request_id(request.request_id());
  pb::Reply* reply = o.data.mutable_reply();
  reply->set_key(wire::keyOf(request));
  reply->set_round(wire::roundOf(request));
  reply->set_dtype(dtypeOf(request));
  return o;
}

Outgoing errorReply(PeerId peer, const pb::Data& request, const std::string& error) {
  Outgoing o;
  o.peer = peer;
  o.data.set_request_id(request.request_id());
  pb::Error* e = o.data.mutable_error();
  e->set_key(wire::keyOf(request));
  e->set_round(wire::roundOf(request));
  e->set_text(error.substr(0, 4000));
  return o;
}

}  // namespace zps
