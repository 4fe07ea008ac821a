#include "daemon/ingest/wire_decode.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "google/protobuf/io/coded_stream.h"
#include "google/protobuf/io/zero_copy_stream_impl_lite.h"
#include "google/protobuf/wire_format_lite.h"

namespace fabricscope {
namespace {

using google::protobuf::Descriptor;
using google::protobuf::FieldDescriptor;
using google::protobuf::internal::WireFormatLite;
using google::protobuf::io::CodedInputStream;

// The length of the valid UTF-8 sequence at the start of `s`, 0 when the
// first byte does not start one.
size_t ValidSequenceLength(absl::string_view s) {
  const auto b = [&](size_t i) { return static_cast<uint8_t>(s[i]); };
  const uint8_t c = b(0);
  if (c < 0x80) return 1;
  size_t n = 0;
  uint8_t lo = 0x80, hi = 0xBF;  // the bounds of the second byte
  if (c >= 0xC2 && c <= 0xDF) {
    n = 2;
  } else if (c >= 0xE0 && c <= 0xEF) {
    n = 3;
    if (c == 0xE0) lo = 0xA0;  // overlong
    if (c == 0xED) hi = 0x9F;  // surrogates
  } else if (c >= 0xF0 && c <= 0xF4) {
    n = 4;
    if (c == 0xF0) lo = 0x90;  // overlong
    if (c == 0xF4) hi = 0x8F;  // past U+10FFFF
  } else {
    return 0;
  }
  if (s.size() < n || b(1) < lo || b(1) > hi) return 0;
  for (size_t i = 2; i < n; ++i) {
    if (b(i) < 0x80 || b(i) > 0xBF) return 0;
  }
  return n;
}

struct Walk {
  uint64_t total_bytes = 0;
  uint64_t repaired_strings = 0;
  std::string first_repaired_field;
  std::string error;
};

// Re-encodes one message of type `type` from `in` (to its end) into `out`,
// repairing string fields. False (with walk->error) on bytes that are not
// such a message.
bool Transcode(CodedInputStream* in, const Descriptor* type, const std::string& path, int depth,
               Walk* walk, std::string* out) {
  if (depth > kMaxDecodeDepth) {
    walk->error = absl::StrCat("nested deeper than ", kMaxDecodeDepth, " messages at ", path);
    return false;
  }
  google::protobuf::io::StringOutputStream sink(out);
  google::protobuf::io::CodedOutputStream o(&sink);
  std::string value;
  while (true) {
    const uint32_t tag = in->ReadTag();
    if (tag == 0) {
      if (!in->ConsumedEntireMessage()) {
        walk->error = absl::StrCat("bad field tag in ", path.empty() ? type->name() : path);
        return false;
      }
      return true;
    }
    const int number = WireFormatLite::GetTagFieldNumber(tag);
    const FieldDescriptor* field = type->FindFieldByNumber(number);
    const std::string where = field == nullptr
                                  ? absl::StrCat(path, path.empty() ? "" : ".", number)
                                  : absl::StrCat(path, path.empty() ? "" : ".", field->name());
    const auto truncated = [&] {
      walk->error = absl::StrCat("truncated or malformed field ", where);
      return false;
    };
    o.WriteTag(tag);
    switch (WireFormatLite::GetTagWireType(tag)) {
      case WireFormatLite::WIRETYPE_VARINT: {
        uint64_t v = 0;
        if (!in->ReadVarint64(&v)) return truncated();
        o.WriteVarint64(v);
        break;
      }
      case WireFormatLite::WIRETYPE_FIXED64: {
        uint64_t v = 0;
        if (!in->ReadLittleEndian64(&v)) return truncated();
        o.WriteLittleEndian64(v);
        break;
      }
      case WireFormatLite::WIRETYPE_FIXED32: {
        uint32_t v = 0;
        if (!in->ReadLittleEndian32(&v)) return truncated();
        o.WriteLittleEndian32(v);
        break;
      }
      case WireFormatLite::WIRETYPE_LENGTH_DELIMITED: {
        uint32_t length = 0;
        if (!in->ReadVarint32(&length)) return truncated();
        if (length > walk->total_bytes - static_cast<uint64_t>(in->CurrentPosition())) {
          return truncated();
        }
        if (field != nullptr && field->type() == FieldDescriptor::TYPE_MESSAGE) {
          const auto limit = in->PushLimit(static_cast<int>(length));
          std::string encoded;
          if (!Transcode(in, field->message_type(), where, depth + 1, walk, &encoded)) {
            return false;
          }
          in->PopLimit(limit);
          o.WriteVarint32(static_cast<uint32_t>(encoded.size()));
          o.WriteRaw(encoded.data(), static_cast<int>(encoded.size()));
          break;
        }
        if (!in->ReadString(&value, static_cast<int>(length))) return truncated();
        if (field != nullptr && field->type() == FieldDescriptor::TYPE_STRING &&
            !IsValidUtf8(value)) {
          value = RepairUtf8(value);
          ++walk->repaired_strings;
          if (walk->first_repaired_field.empty()) walk->first_repaired_field = where;
        }
        o.WriteVarint32(static_cast<uint32_t>(value.size()));
        o.WriteRaw(value.data(), static_cast<int>(value.size()));
        break;
      }
      default:  // groups: not in these protocols
        walk->error = absl::StrCat("unsupported wire type in field ", where);
        return false;
    }
  }
}

}  // namespace

bool IsValidUtf8(absl::string_view s) {
  size_t i = 0;
  while (i < s.size()) {
    const size_t n = ValidSequenceLength(s.substr(i));
    if (n == 0) return false;
    i += n;
  }
  return true;
}

std::string RepairUtf8(absl::string_view s) {
  std::string out;
  out.reserve(s.size() + 8);
  size_t i = 0;
  while (i < s.size()) {
    const size_t n = ValidSequenceLength(s.substr(i));
    if (n == 0) {
      out += "\xEF\xBF\xBD";  // U+FFFD
      ++i;
    } else {
      out.append(s.data() + i, n);
      i += n;
    }
  }
  return out;
}

DecodeOutcome DecodeRepairingUtf8(absl::string_view bytes, google::protobuf::Message* message) {
  DecodeOutcome outcome;
  if (message->ParseFromArray(bytes.data(), static_cast<int>(bytes.size()))) {
    outcome.ok = true;
    return outcome;
  }
  Walk walk;
  walk.total_bytes = bytes.size();
  std::string repaired;
  {
    google::protobuf::io::ArrayInputStream raw(bytes.data(), static_cast<int>(bytes.size()));
    CodedInputStream in(&raw);
    in.SetRecursionLimit(kMaxDecodeDepth + 1);
    if (!Transcode(&in, message->GetDescriptor(), "", 0, &walk, &repaired)) {
      outcome.error = std::move(walk.error);
      return outcome;
    }
  }
  message->Clear();
  if (!message->ParseFromString(repaired)) {
    outcome.error = absl::StrCat("not a valid ", message->GetDescriptor()->full_name());
    return outcome;
  }
  outcome.ok = true;
  outcome.repaired_strings = walk.repaired_strings;
  outcome.first_repaired_field = std::move(walk.first_repaired_field);
  return outcome;
}

}  // namespace fabricscope
