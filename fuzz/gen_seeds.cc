// Writes the generated seed corpora of the fuzz targets:
//   fuzz_gen_seeds OUT_DIR      (OUT_DIR: usually fuzz/corpus)
// into OUT_DIR/<target>/gen_*. Deterministic: the same files every run, so
// regenerating changes nothing unless this program or a format changed.
//
//   fuzz_native_span  serialized fabricscope.v1.PushRequest messages
//   fuzz_otlp_span    serialized ExportTraceServiceRequest messages (every
//                     AnyValue type, resource attributes)
//   fuzz_netlink      ethtool genl PAUSE_GET / FEC_GET replies and a dcbnl
//                     DCB_CMD_IEEE_GET reply, laid out like the kernel's
//                     (built with libnl); RDMA netlink replies (device dump,
//                     STAT_GET, STAT_GET_STATUS, QP counter objects) served
//                     by the fake kernel of tests/support/rdma_netlink_fake.h
//   fuzz_recording    sample, span (with and without a judgement), header and
//                     incident lines written by the recording writer
//   fuzz_config       one file setting every option to its default (from
//                     HelpText(), each line checked with ApplyConfigText)
//   fuzz_snapshot     state snapshots written by WriteSnapshot (a small
//                     store, spans and events; an empty one)
//   fuzz_ib_mad       directed-route SubnGetResp(NodeInfo) of a switch and
//                     of a CA, SubnGetResp(NodeDescription), a reply with a
//                     MAD status, the SubnGet request itself (the
//                     attribute bytes at the IB spec's offsets), and PerfMgt
//                     GetResp(PortCounters / PortCountersExtended)
// The text fixtures of tests/fixtures (counter files, ethtool -S captures) are
// used directly by tests/fuzz/run_fuzzers.sh and are not copied here.
#include <linux/dcbnl.h>
#include <linux/ethtool_netlink.h>
#include <linux/rtnetlink.h>
#include <netlink/genl/genl.h>
#include <netlink/msg.h>
#include <netlink/netlink.h>
#include <sys/socket.h>

#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "collectors/ib_mad.h"
#include "collectors/ib_pma.h"
#include "collectors/rdma_netlink.h"
#include "daemon/config.h"
#include "daemon/recording/recording.h"
#include "daemon/state/snapshot.h"
#include "fabricscope/v1/ingest.pb.h"
#include "fuzz/span_checks.h"
#include "opentelemetry/proto/collector/trace/v1/trace_service.pb.h"
#include "tests/support/rdma_netlink_fake.h"

namespace {

namespace fs = std::filesystem;
namespace otlp = opentelemetry::proto;

constexpr uint64_t kNow = 1760000000000000000ull;  // fuzz/span_checks.h kNowNs

std::string g_out;

void Write(const std::string& target, const std::string& name, const std::string& bytes) {
  fs::create_directories(fs::path(g_out) / target);
  std::ofstream f(fs::path(g_out) / target / ("gen_" + name), std::ios::binary | std::ios::trunc);
  f.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  if (!f) {
    std::fprintf(stderr, "cannot write %s/%s\n", target.c_str(), name.c_str());
    std::exit(1);
  }
}

std::string Bytes(std::initializer_list<uint8_t> b) { return std::string(b.begin(), b.end()); }

// --- native spans ----------------------------------------------------------

void NativeSpan(fabricscope::v1::Span* s, uint8_t id, const std::string& name) {
  s->set_trace_id(Bytes({0x70, 0x1a, 0xc0, 0xda, 0xd0, 0x01, 0xec, 0x68, 0x32, 0x8e, 0x65, 0xc9,
                         0x1a, 0x4d, 0x10, id}));
  s->set_span_id(Bytes({0xa8, 0x47, 0x6a, 0x4c, 0xdf, 0xf8, 0x25, id}));
  s->set_name(name);
  s->set_start_unix_nano(kNow - 40000000);
  s->set_end_unix_nano(kNow - 10000000);
}

void Native() {
  {
    fabricscope::v1::PushRequest r;
    NativeSpan(r.add_spans(), 1, "decode_step");
    Write("fuzz_native_span", "one_span", r.SerializeAsString());
  }
  {
    fabricscope::v1::PushRequest r;
    auto* s = r.add_spans();
    NativeSpan(s, 2, "allreduce");
    s->set_parent_span_id(Bytes({1, 2, 3, 4, 5, 6, 7, 8}));
    s->set_kind(fabricscope::v1::SPAN_KIND_COLLECTIVE);
    for (auto [k, v] :
         std::vector<std::pair<const char*, const char*>>{{"rdma.device", "mlx5_0"},
                                                          {"rdma.port", "1"},
                                                          {"network.interface.name", "eth2"},
                                                          {"fabricscope.stall", "true"},
                                                          {"fabricscope.kind", "kv_transfer"}}) {
      auto* a = s->add_attributes();
      a->set_key(k);
      a->set_value(v);
    }
    s->set_rdma_device("mlx5_1");
    s->set_rdma_port(2);
    s->set_network_interface_name("eth3");
    s->set_stall(true);
    Write("fuzz_native_span", "attributes", r.SerializeAsString());
  }
  {
    fabricscope::v1::PushRequest r;
    NativeSpan(r.add_spans(), 3, "prefill");
    auto* bad_ids = r.add_spans();
    NativeSpan(bad_ids, 4, "kv_transfer");
    bad_ids->set_span_id(std::string(8, '\0'));
    auto* backwards = r.add_spans();
    NativeSpan(backwards, 5, "request");
    backwards->set_end_unix_nano(kNow - 50000000);
    auto* old = r.add_spans();
    NativeSpan(old, 6, "request");
    old->set_start_unix_nano(1000);
    old->set_end_unix_nano(2000);
    Write("fuzz_native_span", "mixed", r.SerializeAsString());
  }
  {
    // Regression (found by fuzz_native_span): an end time >= 2^63 becomes a
    // negative int64 in ConvertNativeSpan; ValidateSpan then computes
    // start - end for the end_before_start detail and overflows
    // (daemon/ingest/span_validation.cc, "end is ... ns before start").
    fabricscope::v1::PushRequest r;
    auto* s = r.add_spans();
    NativeSpan(s, 8, "x");
    s->set_end_unix_nano(1ull << 63);
    Write("fuzz_native_span", "regress_end_2p63", r.SerializeAsString());
  }
  {
    // Strings that are not UTF-8 (a Latin-1 name, a cut sequence in an
    // attribute value): the Push method repairs them (wire_decode.h).
    fabricscope::v1::PushRequest r;
    NativeSpan(r.add_spans(), 10, "caf\xe9 decode");
    auto* a = r.mutable_spans(0)->add_attributes();
    a->set_key("model");
    a->set_value("llama\xe2\x82");
    NativeSpan(r.add_spans(), 11, "decode");
    Write("fuzz_native_span", "invalid_utf8", r.SerializePartialAsString());
  }
}

// --- OTLP --------------------------------------------------------------------

void Kv(google::protobuf::RepeatedPtrField<otlp::common::v1::KeyValue>* out, const std::string& k,
        const std::string& v) {
  auto* kv = out->Add();
  kv->set_key(k);
  kv->mutable_value()->set_string_value(v);
}

void OtlpSpan(otlp::trace::v1::Span* s, uint8_t id, const std::string& name) {
  s->set_trace_id(Bytes({0x5b, 0x8e, 0xff, 0xf7, 0x98, 0x03, 0x81, 0x03, 0xd2, 0x69, 0xb6, 0x33,
                         0x81, 0x3f, 0xc6, id}));
  s->set_span_id(Bytes({0xeb, 0xf5, 0x1a, 0x3e, 0x0b, 0x05, 0x0c, id}));
  s->set_name(name);
  s->set_kind(otlp::trace::v1::Span::SPAN_KIND_CLIENT);
  s->set_start_time_unix_nano(kNow - 40000000);
  s->set_end_time_unix_nano(kNow - 10000000);
}

void Otlp() {
  {
    otlp::collector::trace::v1::ExportTraceServiceRequest r;
    auto* rs = r.add_resource_spans();
    Kv(rs->mutable_resource()->mutable_attributes(), "service.name", "vllm");
    Kv(rs->mutable_resource()->mutable_attributes(), "host.name", "gpu-node-7");
    Kv(rs->mutable_resource()->mutable_attributes(), "process.pid", "4242");
    auto* ss = rs->add_scope_spans();
    ss->mutable_scope()->set_name("fabricscope.fuzz");
    auto* s = ss->add_spans();
    OtlpSpan(s, 1, "decode_step");
    Kv(s->mutable_attributes(), "rdma.device", "mlx5_0");
    Kv(s->mutable_attributes(), "rdma.port", "1");
    Kv(s->mutable_attributes(), "network.interface.name", "eth2");
    Write("fuzz_otlp_span", "one_span", r.SerializeAsString());
  }
  {
    otlp::collector::trace::v1::ExportTraceServiceRequest r;
    auto* rs = r.add_resource_spans();
    Kv(rs->mutable_resource()->mutable_attributes(), "service.name", "trainer");
    auto* ss = rs->add_scope_spans();
    auto* s = ss->add_spans();
    OtlpSpan(s, 2, "nccl:all_reduce");
    s->set_parent_span_id(Bytes({9, 8, 7, 6, 5, 4, 3, 2}));
    auto* attrs = s->mutable_attributes();
    auto add = [&](const char* key) {
      auto* kv = attrs->Add();
      kv->set_key(key);
      return kv->mutable_value();
    };
    add("b")->set_bool_value(true);
    add("i")->set_int_value(-42);
    add("d")->set_double_value(0.1);
    add("x")->set_bytes_value(Bytes({0xde, 0xad, 0xbe, 0xef}));
    auto* arr = add("a")->mutable_array_value();
    arr->add_values()->set_string_value("s");
    arr->add_values()->set_int_value(7);
    auto* kvl = add("m")->mutable_kvlist_value();
    Kv(kvl->mutable_values(), "k", "v");
    add("fabricscope.stall")->set_string_value("true");
    auto* ev = s->add_events();
    ev->set_name("event");
    s->add_links()->set_trace_id(std::string(16, '\1'));
    s->mutable_status()->set_message("ok");
    auto* bad = ss->add_spans();
    OtlpSpan(bad, 3, "");
    Write("fuzz_otlp_span", "any_values", r.SerializeAsString());
  }
  {
    // Regression: as regress_end_2p63 of fuzz_native_span, through
    // ConvertOtlpSpan.
    otlp::collector::trace::v1::ExportTraceServiceRequest r;
    auto* s = r.add_resource_spans()->add_scope_spans()->add_spans();
    OtlpSpan(s, 9, "x");
    s->set_end_time_unix_nano(1ull << 63);
    Write("fuzz_otlp_span", "regress_end_2p63", r.SerializeAsString());
  }
  {
    // Strings that are not UTF-8 in a resource attribute, a span name and a
    // nested value: the Export method repairs them (wire_decode.h).
    otlp::collector::trace::v1::ExportTraceServiceRequest r;
    auto* rs = r.add_resource_spans();
    Kv(rs->mutable_resource()->mutable_attributes(), "service.name", "vllm\xc0");
    auto* s = rs->add_scope_spans()->add_spans();
    OtlpSpan(s, 10, "llm_request\xff");
    auto* kv = s->add_attributes();
    kv->set_key("nested");
    auto* inner = kv->mutable_value()->mutable_kvlist_value()->add_values();
    inner->set_key("k");
    inner->mutable_value()->set_string_value("\xed\xa0\x80");
    Write("fuzz_otlp_span", "invalid_utf8", r.SerializePartialAsString());
  }
}

// --- netlink -----------------------------------------------------------------

std::string MsgBytes(nl_msg* msg) {
  nlmsghdr* h = nlmsg_hdr(msg);
  std::string out(reinterpret_cast<const char*>(h), h->nlmsg_len);
  nlmsg_free(msg);
  return out;
}

constexpr int kEthtoolFamily = 0x1d;  // any id: the parsers do not look at it

nl_msg* EthtoolReply(uint8_t cmd, int header_attr) {
  nl_msg* msg = nlmsg_alloc();
  genlmsg_put(msg, 0, 1, kEthtoolFamily, 0, 0, cmd, ETHTOOL_GENL_VERSION);
  nlattr* hdr = nla_nest_start(msg, header_attr);
  nla_put_u32(msg, ETHTOOL_A_HEADER_DEV_INDEX, 2);
  nla_put_string(msg, ETHTOOL_A_HEADER_DEV_NAME, "eth2");
  nla_nest_end(msg, hdr);
  return msg;
}

void Netlink() {
  std::string pause;
  {
    nl_msg* msg = EthtoolReply(ETHTOOL_MSG_PAUSE_GET_REPLY, ETHTOOL_A_PAUSE_HEADER);
    nla_put_u8(msg, ETHTOOL_A_PAUSE_AUTONEG, 0);
    nla_put_u8(msg, ETHTOOL_A_PAUSE_RX, 1);
    nla_put_u8(msg, ETHTOOL_A_PAUSE_TX, 1);
    nlattr* stats = nla_nest_start(msg, ETHTOOL_A_PAUSE_STATS);
    nla_put(msg, ETHTOOL_A_PAUSE_STAT_PAD, 0, nullptr);
    nla_put_u64(msg, ETHTOOL_A_PAUSE_STAT_TX_FRAMES, 1234567);
    nla_put_u64(msg, ETHTOOL_A_PAUSE_STAT_RX_FRAMES, 89);
    nla_nest_end(msg, stats);
    pause = MsgBytes(msg);
    Write("fuzz_netlink", "ethtool_pause_reply", pause);
  }
  std::string fec;
  {
    nl_msg* msg = EthtoolReply(ETHTOOL_MSG_FEC_GET_REPLY, ETHTOOL_A_FEC_HEADER);
    nla_put_u8(msg, ETHTOOL_A_FEC_AUTO, 0);
    nla_put_u32(msg, ETHTOOL_A_FEC_ACTIVE, 2);
    nlattr* stats = nla_nest_start(msg, ETHTOOL_A_FEC_STATS);
    const uint64_t corrected[] = {30, 10, 20};  // total, lane 0, lane 1
    const uint64_t uncorr[] = {1};
    const uint64_t bits[] = {500, 200, 300};
    nla_put(msg, ETHTOOL_A_FEC_STAT_CORRECTED, sizeof(corrected), corrected);
    nla_put(msg, ETHTOOL_A_FEC_STAT_UNCORR, sizeof(uncorr), uncorr);
    nla_put(msg, ETHTOOL_A_FEC_STAT_CORR_BITS, sizeof(bits), bits);
    nla_nest_end(msg, stats);
    fec = MsgBytes(msg);
    Write("fuzz_netlink", "ethtool_fec_reply", fec);
  }
  std::string dcb;
  {
    nl_msg* msg = nlmsg_alloc_simple(RTM_GETDCB, 0);
    dcbmsg d{};
    d.dcb_family = AF_UNSPEC;
    d.cmd = DCB_CMD_IEEE_GET;
    nlmsg_append(msg, &d, sizeof(d), NLMSG_ALIGNTO);
    nla_put_string(msg, DCB_ATTR_IFNAME, "eth2");
    nlattr* ieee = nla_nest_start(msg, DCB_ATTR_IEEE);
    ieee_pfc pfc{};
    pfc.pfc_cap = 8;
    pfc.pfc_en = 0x08;  // priority 3
    nla_put(msg, DCB_ATTR_IEEE_PFC, sizeof(pfc), &pfc);
    nla_nest_end(msg, ieee);
    dcb = MsgBytes(msg);
    Write("fuzz_netlink", "dcb_ieee_get_reply", dcb);
  }
  // One receive buffer holding several messages, as nl_recv may return.
  Write("fuzz_netlink", "multi", pause + fec + dcb);
  // RDMA netlink answers as the fake kernel lays them out (the UAPI's nests).
  {
    fabricscope::FakeRdmaNetlinkKernel kernel;
    fabricscope::FakeRdmaPort port{.port = 1};
    port.counters = {{"out_of_sequence", 340}, {"rp_cnp_handled", 1ull << 40}};
    port.optional = {{"cc_rx_ce_pkts", 3, true}, {"cc_tx_cnp_pkts", 4, false}};
    port.qp_counters = {{.id = 1, .pid = 4242, .qps = 2, .counters = {{"out_of_sequence", 9}}}};
    kernel.AddDevice({.index = 1, .name = "mlx5_0", .ports = {port}});
    auto t = kernel.NewTransport();
    const std::pair<const char*, nl_msg*> requests[] = {
        {"rdma_device_dump", fabricscope::BuildRdmaDeviceDump()},
        {"rdma_stat_get", fabricscope::BuildRdmaStatGet(1, 1)},
        {"rdma_stat_status", fabricscope::BuildRdmaStatGetStatus(1, 1)},
        {"rdma_qp_counters", fabricscope::BuildRdmaQpCounterDump(1)},
    };
    for (const auto& [name, request] : requests) {
      std::vector<uint8_t> replies;
      if (t->Exchange(request, &replies).ok()) {
        Write("fuzz_netlink", name, std::string(replies.begin(), replies.end()));
      }
      nlmsg_free(request);
    }
  }
  // Regression: an NLMSG_ERROR whose error is INT_MIN. The collectors negated
  // it to get the errno (collectors/ethtool_netlink.cc, dcb_config_collector.cc,
  // netdev_collector.cc): signed overflow. Now NetlinkErrno (netlink_util.h).
  {
    struct {
      nlmsghdr hdr;
      nlmsgerr err;
    } m{};
    m.hdr.nlmsg_len = sizeof m;
    m.hdr.nlmsg_type = NLMSG_ERROR;
    m.hdr.nlmsg_seq = 29;
    m.err.error = INT32_MIN;
    m.err.msg.nlmsg_seq = 29;
    Write("fuzz_netlink", "regress_error_int_min",
          std::string(reinterpret_cast<const char*>(&m), sizeof m));
  }
}

// --- recording -----------------------------------------------------------

void Recording() {
  fabricscope::SeriesKey key{"hw_counters", "np_ecn_marked_roce_packets", "mlx5_0", 1, "eth2"};
  Write("fuzz_recording", "sample",
        fabricscope::FormatSampleLine(1760000001230000000, key, 1234567));
  fabricscope::SeriesKey odd{"ethtool", "[0]: rx \"ucast\"\tpackets\\", "", 0, "eth\x01"};
  Write("fuzz_recording", "sample_escapes",
        fabricscope::FormatSampleLine(0, odd, 18446744073709551615ull));
  fabricscope::v1::Span s;
  NativeSpan(&s, 7, "decode_step");
  s.set_kind(fabricscope::v1::SPAN_KIND_DECODE_STEP);
  s.set_parent_span_id(Bytes({1, 2, 3, 4, 5, 6, 7, 8}));
  for (auto [k, v] : std::vector<std::pair<const char*, const char*>>{
           {"rdma.device", "mlx5_0"}, {"rdma.port", "1"}, {"service.name", "fabricsim"}}) {
    auto* a = s.add_attributes();
    a->set_key(k);
    a->set_value(v);
  }
  Write("fuzz_recording", "span_line", fabricscope::FormatSpanLine(s));
  fabricscope::StallJudgement judgement;
  judgement.judged = true;
  judgement.stall = true;
  judgement.source = fabricscope::StallSource::kLearned;
  judgement.cost = 629.6e6;
  judgement.bound = 58.9e6;
  judgement.samples = 1453;
  judgement.key = "fabricsim decode_step";
  Write("fuzz_recording", "span_judged", fabricscope::FormatSpanLine(s, &judgement));
  fabricscope::RecordingHeader header;
  header.version = "0.1.0 (seed)";
  header.from_unix_nano = 1760000000000000000;
  header.to_unix_nano = 1760000060000000000;
  header.ports.push_back({"mlx5_0", 1, "eth2", "Ethernet", "ACTIVE", "200 Gb/sec (4X HDR)", true,
                          "mlx5", "28.39.1002"});
  header.topology.partners.push_back(
      {"mlx5_0", 1, "eth2", "lldp", "02:00:00:00:01:00", "leaf01", "Ethernet1/1", "to host"});
  header.topology.ports.push_back({"mlx5_0", 1, "eth2", "0000:04:00.0", 1});
  header.topology.gpus.push_back({"0000:03:00.0", 0, "nvidia", "H100", 0});
  header.topology.affinity.push_back({"0000:03:00.0", 0, "mlx5_0", fabricscope::PciRelation::kPix});
  const fabricscope::PodRef pod{"llm", "vllm-0", "engine", "8f2c1d90-3e5a-4b17-9c2e-5da9abb51763"};
  header.pods.devices.push_back({pod, "nvidia.com/cx7_vf", "0000:04:00.2",
                                 fabricscope::PodDeviceKind::kRdma, "mlx5_2", "mlx5_0",
                                 "0000:04:00.2"});
  header.pods.processes.push_back({4242, 1, pod, "devices"});
  header.options = {{"correlate-rate-factor", "3"},
                    {"baseline-window", "10s"},
                    {"stall-thresholds", "decode_step=200ms"},
                    {"pfc-storm-fraction", "0.8"}};
  Write("fuzz_recording", "header", fabricscope::FormatRecordingHeaderLine(header));
  Write("fuzz_recording", "span_object", fabricscope::FormatSpanJson(s));
  // The reader's extras: unknown fields, \u escapes, nesting, stall, rdma_port.
  Write("fuzz_recording", "span_extras",
        R"({"span":{"trace_id":"701AC0DAD001EC68328E65C91A4D1020","span_id":"a8476a4cdff8256c",)"
        R"("name":"d\u00e9code\n","kind":"other","start_unix_nano":1,"end_unix_nano":2,)"
        R"("attributes":{"k":[1,{"x":null}],"n":1.5e3},"rdma_device":"mlx5_1","rdma_port":2,)"
        R"("netdev":"eth3","stall":true,"extra":{"a":[true,false,null]}}})");
  // The incident line heading an --incident-dir recording (one active episode).
  fabricscope::IncidentHeader h;
  h.from_unix_nano = 1760000001000000000;
  h.to_unix_nano = 1760000003600000000;
  h.device = "mlx5_0";
  h.port = 1;
  h.netdev = "eth2";
  h.closed = "capped";
  fabricscope::DetectorEvent e;
  e.id = 7;
  e.detector = "pfc_storm";
  e.kind = "storm";
  e.device = "mlx5_0";
  e.port = 1;
  e.netdev = "eth2";
  e.priority = "3";
  e.direction = "rx";
  e.start_unix_nano = 1760000001000000000;
  e.detected_unix_nano = 1760000001200000000;
  e.peak = 0.93;
  e.summary = "eth2 priority 3 rx: paused \"93%\"";
  h.episodes.push_back(e);
  h.episodes_omitted = 2;
  Write("fuzz_recording", "incident", fabricscope::FormatIncidentLine(h));
}

// --- config -----------------------------------------------------------------

void Config() {
  // "  --key=VALUE" then "(default: X)" a few lines below.
  std::string all;
  std::string key;
  for (absl::string_view line : absl::StrSplit(fabricscope::HelpText(), '\n')) {
    absl::string_view t = absl::StripLeadingAsciiWhitespace(line);
    if (absl::ConsumePrefix(&t, "--")) {
      key = std::string(t.substr(0, t.find('=')));
      continue;
    }
    if (key.empty() || !absl::ConsumePrefix(&t, "(default: ")) continue;
    absl::ConsumeSuffix(&t, ")");
    std::string entry = absl::StrCat(key, " = ", t, "\n");
    fabricscope::Config c;
    if (key != "config" && fabricscope::ApplyConfigText(entry, "seed", &c).ok()) all += entry;
    key.clear();
  }
  Write("fuzz_config", "all_defaults.conf", all);
  Write("fuzz_config", "example.conf",
        "# /etc/fabricscope/fabricscoped.conf\n"
        "sysfs-root = /sys\n"
        "hot-interval = 10ms\n"
        "log-level: info   # colon form\n"
        "netdev-include = \"eth[0-9]+|ens.*\"\n"
        "store-memory = 512MiB\n"
        "\n"
        "metrics-listen = [::1]:9478\n");
  // Regressions: std::regex compiles recursively, so a deeply nested (or long
  // enough) pattern overflows the stack where the config validates it --
  // daemon/config.cc (netdev-include, `std::regex re{...}`) and
  // daemon/spans/span_kind.cc ParseSpanKindPatterns (span-kind-patterns).
  // These overflow under ASan; the release fabricscoped dies with SIGSEGV at
  // startup from 30000 levels on, instead of rejecting the value.
  const std::string nested = std::string(10000, '(') + std::string(10000, ')');
  Write("fuzz_config", "regress_regex_depth_netdev_include", "netdev-include = " + nested + "\n");
  Write("fuzz_config", "regress_regex_depth_span_kind",
        "span-kind-patterns = " + nested + "=request\n");
  // Regression: libstdc++'s regex scanner reads one character past a final
  // '(' (looking for "(?"); NetdevFilter::Compile handed it the config value's
  // range, not NUL-terminated: a heap-buffer-overflow under ASan
  // (collectors/netdev_filter.cc). No final newline: the value ends the input.
  Write("fuzz_config", "regress_regex_paren_at_end_netdev_include", "netdev-include = eth((");
}

// --- state snapshot ---------------------------------------------------------

void Snapshot() {
  // A small store as a daemon holds it: a counter over two chunks and a
  // head, a gauge, two spans, a closed and an active event.
  constexpr int64_t kT = 1'700'000'000'000'000'000;
  fabricscope::Store store;
  const fabricscope::SeriesKey bytes{"counters", "port_xmit_data", "mlx5_0", 1, ""};
  const fabricscope::SeriesKey gauge{"dcb_config", "pfc_enabled_prio3", "", 0, "eth0"};
  const fabricscope::SeriesId b = store.Register(bytes, *fabricscope::MapCounter(bytes));
  const fabricscope::SeriesId g = store.Register(gauge, *fabricscope::MapCounter(gauge));
  // Half with their own timestamps, half on a tick time column (time block records).
  fabricscope::TickColumn* column = store.AddTickColumn(absl::Milliseconds(10));
  for (int64_t i = 0; i < 9000; ++i) {
    const int64_t ts = kT + i * 10'000'000 + (i % 3) * 1000;
    if (i < 4500) {
      store.Append(b, ts, i * 3 + (i % 5));
    } else {
      store.Append(b, store.Tick(column, ts), i * 3 + (i % 5));
    }
  }
  store.Append(g, kT, 1);
  fabricscope::FakeClock clock(kT + 100'000'000'000);
  fabricscope::SpanStore spans({}, &clock, nullptr);
  fabricscope::Span s;
  s.trace_id[0] = 1;
  s.span_id[0] = 2;
  s.name = "decode_step";
  s.kind = fabricscope::SpanKind::kDecodeStep;
  s.start_unix_nano = kT + 1'000'000'000;
  s.end_unix_nano = kT + 1'050'000'000;
  s.attributes = {{"service.name", "vllm"}};
  s.netdev = "eth0";
  s.protocol = "native";
  spans.Add(s);
  s.span_id[0] = 3;
  s.stall_flag = true;
  // Judged, so the seed carries a stall judgement and a learner record.
  fabricscope::StallLearnerOptions learn;
  learn.warmup = 1;
  fabricscope::StallLearner learner(learn, nullptr);
  learner.Judge(&s);
  spans.Add(s);
  fabricscope::EventLog events(16, nullptr);
  fabricscope::DetectorEvent e;
  e.detector = "pfc_storm";
  e.kind = "storm";
  e.netdev = "eth0";
  e.priority = "3";
  e.direction = "rx";
  e.start_unix_nano = kT + 5'000'000'000;
  events.Close(events.Open(e), kT + 6'000'000'000, 0.95, "storm");
  e.detector = "microburst";
  e.kind = "burst";
  events.Open(e);
  const std::string dir = g_out + "/fuzz_snapshot";
  std::filesystem::create_directories(dir);
  fabricscope::SnapshotCounts counts;
  absl::Status st =
      fabricscope::WriteSnapshot(dir + "/gen_small", store, spans, events, kT + 90'000'000'000,
                                 absl::InfiniteFuture(), &counts, &learner);
  if (!st.ok()) {
    std::fprintf(stderr, "snapshot seed: %s\n", std::string(st.message()).c_str());
    std::exit(1);
  }
  // And an empty one.
  fabricscope::Store empty_store;
  fabricscope::SpanStore empty_spans({}, &clock, nullptr);
  fabricscope::EventLog empty_events(16, nullptr);
  st = fabricscope::WriteSnapshot(dir + "/gen_empty", empty_store, empty_spans, empty_events, kT,
                                  absl::InfiniteFuture(), &counts);
  if (!st.ok()) std::exit(1);
}

// A SubnGetResp of `attribute` as the peer's SMA answers the one-hop query.
std::string IbReply(uint16_t attribute, uint16_t status, const std::vector<uint8_t>& data) {
  std::vector<uint8_t> m = fabricscope::BuildNeighborSmpGet(attribute, 1, 0x0000000100000042);
  m[3] = 0x81;                                        // R | GetResp
  m[4] = static_cast<uint8_t>(0x80 | (status >> 8));  // D | Status
  m[5] = static_cast<uint8_t>(status);
  m[6] = 1;  // HopPointer
  for (size_t i = 0; i < data.size() && i < 64; ++i) m[64 + i] = data[i];
  m[193] = 17;  // ReturnPath[1]
  return std::string(m.begin(), m.end());
}

std::vector<uint8_t> IbNodeInfo(uint8_t type, uint8_t nports, uint64_t guid, uint8_t local_port) {
  std::vector<uint8_t> d(64, 0);
  d[0] = 1;
  d[1] = 1;
  d[2] = type;
  d[3] = nports;
  for (int off : {4, 12, 20}) {
    for (int i = 0; i < 8; ++i) d[off + i] = static_cast<uint8_t>(guid >> (56 - 8 * i));
  }
  d[28] = 0x00, d[29] = 0x08;  // PartitionCap
  d[30] = 0xd2, d[31] = 0xf0;  // DeviceID
  d[35] = 0xa0;                // Revision
  d[36] = local_port;
  d[37] = 0x00, d[38] = 0x02, d[39] = 0xc9;  // VendorID
  return d;
}

void IbMad() {
  Write("fuzz_ib_mad", "nodeinfo_switch",
        IbReply(fabricscope::kSmpAttrNodeInfo, 0, IbNodeInfo(2, 41, 0x0c42a1030079b4c0, 17)));
  Write("fuzz_ib_mad", "nodeinfo_ca",
        IbReply(fabricscope::kSmpAttrNodeInfo, 0, IbNodeInfo(1, 1, 0xb8cef60300a1b2c2, 1)));
  const std::string desc = "MF0;leaf07:MQM8700/U1";
  Write("fuzz_ib_mad", "nodedesc",
        IbReply(fabricscope::kSmpAttrNodeDescription, 0,
                std::vector<uint8_t>(desc.begin(), desc.end())));
  Write("fuzz_ib_mad", "status_unsupported",
        IbReply(fabricscope::kSmpAttrNodeInfo, 0x000c, std::vector<uint8_t>(64, 0)));
  const std::vector<uint8_t> get =
      fabricscope::BuildNeighborSmpGet(fabricscope::kSmpAttrNodeInfo, 1, 0x42);
  Write("fuzz_ib_mad", "request", std::string(get.begin(), get.end()));
  for (uint16_t attr :
       {fabricscope::kPmaAttrPortCounters, fabricscope::kPmaAttrPortCountersExtended}) {
    std::vector<uint8_t> pma = fabricscope::BuildPmaGet(attr, 1, 0x4242);
    pma[3] = fabricscope::kMadMethodGetResp;
    for (size_t i = fabricscope::kPmaDataOffset + 4; i < pma.size(); ++i) {
      pma[i] = static_cast<uint8_t>(i * 7);
    }
    Write("fuzz_ib_mad",
          attr == fabricscope::kPmaAttrPortCounters ? "pma_port_counters" : "pma_port_counters_ext",
          std::string(pma.begin(), pma.end()));
  }
}

}  // namespace

int main(int argc, char** argv) {
  // The invalid_utf8 seeds are serialized on purpose: no protobuf complaint.
  fabricscope::fuzz::SilenceProtobufLogging();
  if (argc != 2) {
    std::fprintf(stderr, "usage: %s OUT_DIR (usually fuzz/corpus)\n", argv[0]);
    return 2;
  }
  g_out = argv[1];
  Native();
  Otlp();
  Netlink();
  Recording();
  Config();
  Snapshot();
  IbMad();
  return 0;
}
