// The wire form (fabricscope.v1 query messages, proto/fabricscope/v1/
// query.proto) of the query engine's plain answers (daemon/query/
// query_engine.h), and the plain form of its requests. Pure conversions: no
// gRPC, no selection or bounds (those are the engine's).
//
// Used by the gRPC adapter (daemon/service/query_service.h) and by the CLI's
// offline `analyze`, which renders the same messages the daemon would send;
// it lives in its own library (fabricscope_query_proto) so that the CLI links
// it without the server.
//
// Thread-safety: stateless functions.
#pragma once

#include "daemon/correlate/correlator.h"
#include "daemon/detect/event_log.h"
#include "daemon/query/query_engine.h"
#include "daemon/spans/span.h"
#include "fabricscope/v1/query.pb.h"
#include "store/port_inventory.h"
#include "store/store.h"

namespace fabricscope {

// Requests (wire -> plain). Time ranges are read as signed nanoseconds.
CorrelateQuery CorrelateQueryFromProto(const v1::CorrelateRequest& request);
SeriesQuery SeriesQueryFromProto(const v1::SeriesRequest& request);
EventsQuery EventsQueryFromProto(const v1::EventsRequest& request);
QueryTimeRange TimeRangeFromProto(const v1::TimeRange& range);

// Answers (plain -> wire). Where `topology` is given (QueryEngine::Topology(),
// read once per call), each port, event and signal gets its link partner
// (HostTopology::FindPartner by device/port, else netdev); null or no partner:
// the `partner` field stays absent.
// A span's verdict with every series of `correlation` (the engine trims them).
void FillSpanVerdict(const Span& span, const SpanCorrelation& correlation, v1::SpanVerdict* out,
                     const HostTopology* topology = nullptr);
// A request's step-level evidence (CorrelatedSpan::steps) into `out->steps`.
void StepsToProto(const std::vector<SpanRef>& steps, v1::SpanVerdict* out);
// The groups' link partners come from `topology` where it is given.
void CorrelateSummaryToProto(const CorrelateSummary& summary, v1::CorrelateSummary* out,
                             const HostTopology* topology = nullptr);
void SeriesToProto(const SeriesSamples& series, v1::SeriesData* out);
void EventToProto(const DetectorEvent& e, v1::Event* out, const HostTopology* topology = nullptr);
void PortToProto(const PortInfo& p, v1::Port* out, const HostTopology* topology = nullptr);
void LinkPartnerToProto(const LinkPartner& partner, v1::LinkPartner* out);
// A held span (ids, name, kind, times, attributes).
void SpanToProto(const Span& span, v1::Span* out);

}  // namespace fabricscope
