#include "daemon/config.h"

#include <unistd.h>

#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace fabricscope {
namespace {

using ::testing::HasSubstr;

absl::StatusOr<CommandLine> Parse(std::vector<std::string> args) {
  std::vector<char*> argv;
  static std::string prog = "fabricscoped";
  argv.push_back(prog.data());
  for (auto& a : args) argv.push_back(a.data());
  return ParseCommandLine(static_cast<int>(argv.size()), argv.data());
}

std::string WriteTemp(const std::string& text) {
  // One file per test case: ctest runs the cases of this binary in parallel.
  const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
  std::string path = ::testing::TempDir() + "/fabricscoped_test." + info->name() + "." +
                     std::to_string(getpid()) + ".conf";
  std::ofstream(path) << text;
  return path;
}

TEST(ConfigTest, DefaultsMatchTheContract) {
  auto cl = Parse({});
  ASSERT_TRUE(cl.ok()) << cl.status();
  EXPECT_EQ(cl->config.sysfs_root, "/sys");
  EXPECT_EQ(cl->config.metrics_listen, "0.0.0.0:9478");
  EXPECT_EQ(cl->config.grpc_listen, "127.0.0.1:9479");
  EXPECT_EQ(cl->config.hot_interval, absl::Milliseconds(10));
  EXPECT_EQ(cl->config.medium_interval, absl::Milliseconds(100));
  EXPECT_EQ(cl->config.slow_interval, absl::Seconds(1));
  EXPECT_EQ(cl->config.config_interval, absl::Seconds(10));
  EXPECT_EQ(cl->config.store_memory_bytes, 256ull << 20);
  EXPECT_EQ(cl->config.hot_counters.size(), 12u);
}

// The daemon's options and every plugin's share one name space: no name
// twice (a plugin's option shadowed by the daemon's would never be set), and
// each plugin option is parsed into its plugin's values.
TEST(ConfigTest, OptionNamesAreUniqueAcrossTheDaemonAndItsPlugins) {
  std::map<std::string, int> seen;
  std::istringstream help(HelpText());
  for (std::string line; std::getline(help, line);) {
    if (line.rfind("  --", 0) != 0) continue;
    const std::string name = line.substr(4, line.find_first_of("=[", 4) - 4);
    EXPECT_EQ(++seen[name], 1) << "--" << name << " twice";
  }
  EXPECT_EQ(seen.count("pfc-storm-fraction"), 1u);  // a detector's
  EXPECT_EQ(seen.count("kernel-hz"), 1u);           // a collector's
  Config c;
  ASSERT_TRUE(ApplyConfigText("kernel-hz = 250\npfc-storm-fraction = 0.5\n", "t", &c).ok());
  EXPECT_EQ(RestartOnlyChanges(Config{}, c),
            (std::vector<std::string>{"kernel-hz", "pfc-storm-fraction"}));
}

// A config file that cannot be read says why, as the OS does.
TEST(ConfigTest, UnreadableConfigFileSaysWhy) {
  auto missing = Parse({"--config=/nonexistent/fabricscoped.conf"});
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.status().message(),
            "cannot read config file /nonexistent/fabricscoped.conf: No such file or directory");
  auto dir = Parse({"--config=/tmp"});
  ASSERT_FALSE(dir.ok());
  EXPECT_EQ(dir.status().message(), "cannot read config file /tmp: Is a directory");
}

TEST(ConfigTest, FlagsInBothSpellings) {
  auto cl = Parse({"--sysfs-root=/tmp/x", "--hot-interval", "20ms", "--log-level=debug",
                   "--store-memory=64MiB"});
  ASSERT_TRUE(cl.ok()) << cl.status();
  EXPECT_EQ(cl->config.sysfs_root, "/tmp/x");
  EXPECT_EQ(cl->config.hot_interval, absl::Milliseconds(20));
  EXPECT_EQ(cl->config.log_level, LogLevel::kDebug);
  EXPECT_EQ(cl->config.store_memory_bytes, 64ull << 20);
}

TEST(ConfigTest, FlagsOverrideTheFile) {
  std::string path = WriteTemp(
      "# comment\n"
      "sysfs-root = /from/file\n"
      "hot-interval: 50ms   # trailing comment\n"
      "log-level = \"warn\"\n");
  auto cl = Parse({"--config=" + path, "--hot-interval=30ms"});
  ASSERT_TRUE(cl.ok()) << cl.status();
  EXPECT_EQ(cl->config.sysfs_root, "/from/file");
  EXPECT_EQ(cl->config.hot_interval, absl::Milliseconds(30));
  EXPECT_EQ(cl->config.log_level, LogLevel::kWarn);
  EXPECT_EQ(cl->config.config_file, path);
}

TEST(ConfigTest, BadValuesNameTheKeyAndTheAllowedValues) {
  auto a = Parse({"--hot-interval=fast"});
  ASSERT_FALSE(a.ok());
  EXPECT_THAT(std::string(a.status().message()),
              ::testing::StartsWith("invalid value \"fast\" for flag --hot-interval: "));
  EXPECT_THAT(std::string(a.status().message()), HasSubstr("10ms"));

  auto b = Parse({"--log-level=loud"});
  ASSERT_FALSE(b.ok());
  EXPECT_THAT(std::string(b.status().message()), HasSubstr("debug, info, warn, error"));

  auto c = Parse({"--metrics-listen=nohostport"});
  ASSERT_FALSE(c.ok());
  EXPECT_THAT(std::string(c.status().message()), HasSubstr("metrics-listen"));

  auto d = Parse({"--no-such-flag=1"});
  ASSERT_FALSE(d.ok());
  EXPECT_THAT(std::string(d.status().message()), HasSubstr("no-such-flag"));

  auto e = Parse({"--hot-interval=-5ms"});
  EXPECT_FALSE(e.ok());
  auto f = Parse({"--store-memory=12parsecs"});
  EXPECT_FALSE(f.ok());
  auto g = Parse({"--grpc-listen=127.0.0.1:70000"});
  EXPECT_FALSE(g.ok());
  auto h = Parse({"--netdev-include=(unclosed"});
  EXPECT_FALSE(h.ok());
}

TEST(ConfigTest, NetdevIncludeIsCompiledOnceIntoTheCollectorOptions) {
  auto bad = Parse({"--netdev-include=(unclosed"});
  ASSERT_FALSE(bad.ok());
  EXPECT_THAT(std::string(bad.status().message()), HasSubstr("netdev-include"));
  auto cl = Parse({"--netdev-include=fsv[ab].*"});
  ASSERT_TRUE(cl.ok()) << cl.status();
  absl::StatusOr<CollectorOptions> options = CollectorOptionsFromConfig(cl->config);
  ASSERT_TRUE(options.ok()) << options.status();
  EXPECT_EQ(options->netdev_include.pattern(), "fsv[ab].*");
  EXPECT_TRUE(options->netdev_include.Matches("fsva1"));
  EXPECT_FALSE(options->netdev_include.Matches("eth0"));
  // A Config built by hand with a bad pattern: refused, naming the key.
  Config config;
  config.netdev_include = "(";
  options = CollectorOptionsFromConfig(config);
  ASSERT_FALSE(options.ok());
  EXPECT_EQ(options.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(options.status().message()), HasSubstr("netdev-include"));
  EXPECT_TRUE(CollectorOptionsFromConfig(Config{})->netdev_include.empty());
}

TEST(ConfigTest, BadFileNamesFileLineAndKey) {
  std::string path = WriteTemp("sysfs-root = /x\nslow-interval = soon\n");
  auto cl = Parse({"--config=" + path});
  ASSERT_FALSE(cl.ok());
  EXPECT_THAT(std::string(cl.status().message()),
              ::testing::StartsWith(path + ":2: invalid value \"soon\" for slow-interval: "));

  std::string path2 = WriteTemp("bogus-key = 1\n");
  auto cl2 = Parse({"--config=" + path2});
  ASSERT_FALSE(cl2.ok());
  EXPECT_THAT(std::string(cl2.status().message()), HasSubstr("bogus-key"));

  auto missing = Parse({"--config=/nonexistent/fabricscoped.conf"});
  EXPECT_FALSE(missing.ok());
}

TEST(ConfigTest, ListenAddresses) {
  EXPECT_TRUE(ValidateListenAddress("127.0.0.1:0").ok());
  EXPECT_TRUE(ValidateListenAddress("0.0.0.0:9478").ok());
  EXPECT_TRUE(ValidateListenAddress("[::1]:9479").ok());
  EXPECT_TRUE(ValidateListenAddress("localhost:80").ok());
  EXPECT_FALSE(ValidateListenAddress(":80").ok());
  EXPECT_FALSE(ValidateListenAddress("::1:80").ok());
  EXPECT_FALSE(ValidateListenAddress("host:port").ok());
}

TEST(ConfigTest, ReloadKeepsFlagsOverFileAndReportsRestartOnlyChanges) {
  std::string path = WriteTemp("log-level = info\nsysfs-root = /a\n");
  auto cl = Parse({"--config=" + path, "--hot-interval=20ms"});
  ASSERT_TRUE(cl.ok());
  std::ofstream(path) << "log-level = debug\nsysfs-root = /b\nhot-interval = 99ms\n";
  auto fresh = ReloadConfig(path, cl->flag_args);
  ASSERT_TRUE(fresh.ok()) << fresh.status();
  EXPECT_EQ(fresh->log_level, LogLevel::kDebug);
  EXPECT_EQ(fresh->hot_interval, absl::Milliseconds(20));  // the flag still wins
  EXPECT_THAT(RestartOnlyChanges(cl->config, *fresh), ::testing::ElementsAre("sysfs-root"));

  std::ofstream(path) << "log-level = shouty\n";
  EXPECT_FALSE(ReloadConfig(path, cl->flag_args).ok());
}

TEST(ConfigTest, HelpDocumentsEveryFlagWithItsDefault) {
  std::string help = HelpText();
  for (const char* flag :
       {"--config", "--sysfs-root", "--metrics-listen", "--grpc-listen", "--log-level",
        "--hot-interval", "--medium-interval", "--slow-interval", "--config-interval",
        "--collectors", "--list-collectors", "--version", "--help"}) {
    EXPECT_THAT(help, HasSubstr(flag));
  }
  EXPECT_THAT(help, HasSubstr("(default: 127.0.0.1:9479)"));
  EXPECT_THAT(help, HasSubstr("(default: 10ms)"));
}

TEST(ConfigTest, ByteSizes) {
  EXPECT_EQ(*ParseByteSize("1GiB"), 1ull << 30);
  EXPECT_EQ(*ParseByteSize("5MB"), 5000000u);
  EXPECT_EQ(*ParseByteSize("4096"), 4096u);
  EXPECT_FALSE(ParseByteSize("99999999999999999999GiB").ok());
}

// The detector names come from the registration list
// (daemon/detect/register_all.cc): the help, the default and the error.
TEST(ConfigTest, DetectorsFlagTakesTheRegisteredNames) {
  EXPECT_THAT(HelpText(), HasSubstr("Comma-separated detectors to run: pfc_storm, ecn_mistuning, "
                                    "microburst, retransmit_spike, link_degradation, pause_role; "
                                    "empty runs "
                                    "none."));
  auto ok = Parse({"--detectors=microburst,link_degradation"});
  ASSERT_TRUE(ok.ok()) << ok.status();
  EXPECT_EQ(ok->config.detect.enabled,
            (std::vector<std::string>{"microburst", "link_degradation"}));
  auto bad = Parse({"--detectors=pfc_storm,nope"});
  ASSERT_FALSE(bad.ok());
  EXPECT_THAT(bad.status().message(), HasSubstr("unknown detector 'nope'"));
  EXPECT_THAT(bad.status().message(),
              HasSubstr("one of pfc_storm, ecn_mistuning, microburst, retransmit_spike, "
                        "link_degradation"));
}

TEST(ConfigTest, MetricsProfileDefaultsToFullAndNamesBadValues) {
  auto def = Parse({});
  ASSERT_TRUE(def.ok()) << def.status();
  EXPECT_EQ(def->config.metrics_profile, MetricsProfile::kFull);
  auto fleet = Parse({"--metrics-profile=fleet"});
  ASSERT_TRUE(fleet.ok()) << fleet.status();
  EXPECT_EQ(fleet->config.metrics_profile, MetricsProfile::kFleet);
  auto bad = Parse({"--metrics-profile=tiny"});
  ASSERT_FALSE(bad.ok());
  EXPECT_THAT(bad.status().message(), HasSubstr("one of full, fleet"));
}

// The correlation options (daemon/correlate/correlator.h documents the rules).
TEST(CorrelationConfigTest, OptionsParseAndNameTheKey) {
  Config c;
  ASSERT_TRUE(ApplyConfigText("baseline-window = 5s\nstall-thresholds = decode_step=150ms\n"
                              "max-span-names = 7\ncorrelate-floors = ecn=10\n"
                              "correlate-pause-fraction = 0.2\ncorrelate-rate-factor = 4\n"
                              "correlate-min-coverage = 0.5\ncorrelate-queue = 10\n",
                              "test.conf", &c)
                  .ok());
  EXPECT_EQ(c.baseline_window, absl::Seconds(5));
  ASSERT_EQ(c.stall_thresholds.size(), 1u);
  EXPECT_EQ(c.stall_thresholds[0].second, absl::Milliseconds(150));
  EXPECT_EQ(c.max_span_names, 7u);
  EXPECT_EQ(c.correlate_floors, "ecn=10");
  EXPECT_EQ(c.correlate_pause_fraction, 0.2);
  EXPECT_EQ(c.correlate_rate_factor, 4);
  EXPECT_EQ(c.correlate_min_coverage, 0.5);
  EXPECT_EQ(c.correlate_queue, 10u);

  for (const char* bad :
       {"stall-thresholds = decode_step", "max-span-names = 0", "correlate-floors = nope=1",
        "correlate-pause-fraction = 2", "correlate-rate-factor = 0.5", "baseline-window = 0s"}) {
    absl::Status s = ApplyConfigText(bad, "test.conf", &c);
    ASSERT_FALSE(s.ok()) << bad;
    std::string key(absl::string_view(bad).substr(0, absl::string_view(bad).find(' ')));
    EXPECT_THAT(std::string(s.message()), ::testing::HasSubstr(key)) << bad;
  }
  EXPECT_THAT(HelpText(), ::testing::HasSubstr("--stall-thresholds"));
  EXPECT_THAT(HelpText(), ::testing::HasSubstr("--baseline-window"));
}

}  // namespace
}  // namespace fabricscope
