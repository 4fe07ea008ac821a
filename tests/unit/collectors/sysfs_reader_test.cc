#include "collectors/sysfs_reader.h"

#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <string>

#include "collectors/collector.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace fabricscope {
namespace {

class TempDir {
 public:
  TempDir() {
    char tmpl[] = "/tmp/sysfs_reader_test.XXXXXX";
    path_ = mkdtemp(tmpl);
  }
  ~TempDir() { std::system(("rm -rf '" + path_ + "'").c_str()); }
  const std::string& path() const { return path_; }
  std::string Write(const std::string& name, const std::string& content) const {
    std::string p = path_ + "/" + name;
    std::ofstream(p, std::ios::binary | std::ios::trunc) << content;
    return p;
  }

 private:
  std::string path_;
};

TEST(ParseCounterTest, AcceptsDecimalWithOptionalNewline) {
  EXPECT_EQ(*ParseCounter("0\n"), 0u);
  EXPECT_EQ(*ParseCounter("0042\n"), 42u);
  EXPECT_EQ(*ParseCounter("4294967295\n"), 4294967295u);
  EXPECT_EQ(*ParseCounter("18446744073709551615\n"), UINT64_MAX);
}

TEST(ParseCounterTest, RejectsGarbageAsParseErrors) {
  for (const char* bad :
       {"", "\n", "\n\n", "12\n\n", "42", "742", " 12", "12 ", "-1", "+1", "0x10", "1e3", "12a",
        "abc", "1.5", "18446744073709551616", "99999999999999999999"}) {
    absl::StatusOr<uint64_t> v = ParseCounter(bad);
    ASSERT_FALSE(v.ok()) << "accepted \"" << bad << "\"";
    EXPECT_EQ(CollectorErrorCodeOf(v.status()), CollectorErrorCode::kParse) << bad;
  }
}

TEST(ParseCounterTest, NoPmaIsUnsupported) {
  absl::StatusOr<uint64_t> v = ParseCounter("N/A (no PMA)\n");
  ASSERT_FALSE(v.ok());
  EXPECT_EQ(CollectorErrorCodeOf(v.status()), CollectorErrorCode::kUnsupported);
}

// The errno table itself is tests/unit/collectors/collector_errors_test.cc.
TEST(SysfsReaderTest, ErrorsNameTheOperationAndPath) {
  absl::Status s = CounterFile::Open("/nonexistent-fabricscope/a/b").status();
  EXPECT_TRUE(absl::IsNotFound(s)) << s;
  EXPECT_THAT(std::string(s.message()), testing::HasSubstr("open /nonexistent-fabricscope/a/b"));
}

TEST(CounterFileTest, ReadsCurrentContentThroughTheSameFd) {
  TempDir dir;
  std::string p = dir.Write("c", "10\n");
  absl::StatusOr<CounterFile> f = CounterFile::Open(p);
  ASSERT_TRUE(f.ok()) << f.status();
  const int fd = f->fd();
  EXPECT_EQ(*f->Read(), 10u);
  // Rewritten in place (as the kernel does): the open fd sees the new value.
  dir.Write("c", "123456789012\n");
  EXPECT_EQ(*f->Read(), 123456789012u);
  EXPECT_EQ(f->fd(), fd);
  dir.Write("c", "garbage\n");
  EXPECT_EQ(CollectorErrorCodeOf(f->Read().status()), CollectorErrorCode::kParse);
  dir.Write("c", "");
  EXPECT_EQ(CollectorErrorCodeOf(f->Read().status()), CollectorErrorCode::kParse);
  dir.Write("c", std::string(100, '1'));
  EXPECT_EQ(CollectorErrorCodeOf(f->Read().status()), CollectorErrorCode::kParse);
  dir.Write("c", "7\n");
  EXPECT_EQ(*f->Read(), 7u);
}

TEST(CounterFileTest, MoveTransfersOwnershipAndCloseIsIdempotent) {
  TempDir dir;
  std::string p = dir.Write("c", "1\n");
  CounterFile a = *CounterFile::Open(p);
  CounterFile b = std::move(a);
  EXPECT_FALSE(a.is_open());  // NOLINT(bugprone-use-after-move): the contract under test
  ASSERT_TRUE(b.is_open());
  EXPECT_EQ(*b.Read(), 1u);
  b.Close();
  b.Close();
  EXPECT_FALSE(b.is_open());
}

TEST(CounterFileTest, OpenErrorsAreClassified) {
  TempDir dir;
  EXPECT_EQ(CollectorErrorCodeOf(CounterFile::Open(dir.path() + "/missing").status()),
            CollectorErrorCode::kNotFound);
  if (geteuid() != 0) {  // root reads everything: EACCES cannot be provoked
    std::string p = dir.Write("secret", "1\n");
    chmod(p.c_str(), 0);
    EXPECT_EQ(CollectorErrorCodeOf(CounterFile::Open(p).status()),
              CollectorErrorCode::kPermissionDenied);
  }
}

TEST(ReadAttributeTest, StripsTrailingWhitespace) {
  TempDir dir;
  EXPECT_EQ(*ReadAttribute(dir.Write("ll", "InfiniBand\n\n")), "InfiniBand");
  EXPECT_EQ(*ReadAttribute(dir.Write("rate", "100 Gb/sec (4X EDR)\n")), "100 Gb/sec (4X EDR)");
  EXPECT_EQ(CollectorErrorCodeOf(ReadAttribute(dir.path() + "/nope").status()),
            CollectorErrorCode::kNotFound);
}

TEST(ListDirTest, SortedWithoutDots) {
  TempDir dir;
  dir.Write("b", "");
  dir.Write("a", "");
  mkdir((dir.path() + "/c").c_str(), 0755);
  EXPECT_THAT(*ListDir(dir.path()), testing::ElementsAre("a", "b", "c"));
  EXPECT_EQ(CollectorErrorCodeOf(ListDir(dir.path() + "/none").status()),
            CollectorErrorCode::kNotFound);
}

}  // namespace
}  // namespace fabricscope
