#include "models/yaml_errors.h"

#include <fmt/format.h>
#include <yaml-cpp/eventhandler.h>

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <set>
#include <vector>

#include "sim/error.h"

namespace tpusim {

void yaml_fail(const std::string& file, const YAML::Mark& m, const std::string& key_path,
               const std::string& what) {
  const std::string key = key_path.empty() ? "" : fmt::format(" key '{}':", key_path);
  if (m.line < 0) throw Error(fmt::format("{}:{} {}", file, key, what));
  throw Error(fmt::format("{}:{}:{}:{} {}", file, m.line + 1, m.column + 1, key, what));
}

void yaml_fail(const std::string& file, const YAML::Node& at, const std::string& key_path,
               const std::string& what) {
  yaml_fail(file, at.Mark(), key_path, what);
}

namespace {

std::string child_path(const std::string& parent, const std::string& key) {
  return parent.empty() ? key : parent + "." + key;
}

// No input of tpusim nests this deep; an alias that contains itself (`x: &a [*a]`) would nest
// forever, and every reader would recurse until the stack ran out.
constexpr int kMaxDepth = 64;

// What yaml-cpp accepts silently: a key given twice in one mapping (the first would win),
// explicit tags (!!python/object, !custom) that the readers would ignore, and nesting without end.
void check_document(const std::string& file, const YAML::Node& n, const std::string& path,
                    int depth = 0) {
  if (depth > kMaxDepth)
    yaml_fail(file, n, shortened(path),
              fmt::format("nested deeper than {} levels (an alias that contains itself?)",
                          kMaxDepth));
  static const std::set<std::string> kPlain = {"",
                                               "?",
                                               "!",
                                               "tag:yaml.org,2002:str",
                                               "tag:yaml.org,2002:int",
                                               "tag:yaml.org,2002:float",
                                               "tag:yaml.org,2002:bool",
                                               "tag:yaml.org,2002:null",
                                               "tag:yaml.org,2002:map",
                                               "tag:yaml.org,2002:seq"};
  const std::string& tag = n.Tag();
  if (!kPlain.count(tag))
    yaml_fail(file, n, path, fmt::format("the tag '{}' is not supported (remove it)", tag));
  if (n.IsSequence()) {
    for (size_t i = 0; i < n.size(); ++i)
      check_document(file, n[i], fmt::format("{}[{}]", path, i), depth + 1);
  } else if (n.IsMap()) {
    std::set<std::string> keys;
    for (const auto& kv : n) {
      const std::string key = kv.first.IsScalar() ? kv.first.Scalar() : std::string();
      if (kv.first.IsScalar() && !keys.insert(key).second)
        yaml_fail(file, kv.first, child_path(path, key), "given twice in one mapping");
      check_document(file, kv.second, child_path(path, key), depth + 1);
    }
  }
}

// Where each document of a stream starts, read without building the documents.
class DocumentStarts : public YAML::EventHandler {
 public:
  std::vector<YAML::Mark> marks;
  void OnDocumentStart(const YAML::Mark& mark) override { marks.push_back(mark); }
  void OnDocumentEnd() override {}
  void OnNull(const YAML::Mark&, YAML::anchor_t) override {}
  void OnAlias(const YAML::Mark&, YAML::anchor_t) override {}
  void OnScalar(const YAML::Mark&, const std::string&, YAML::anchor_t,
                const std::string&) override {}
  void OnSequenceStart(const YAML::Mark&, const std::string&, YAML::anchor_t,
                       YAML::EmitterStyle::value) override {}
  void OnSequenceEnd() override {}
  void OnMapStart(const YAML::Mark&, const std::string&, YAML::anchor_t,
                  YAML::EmitterStyle::value) override {}
  void OnMapEnd() override {}
};

}  // namespace

YAML::Node yaml_load_file(const std::string& file) {
  // A directory, a FIFO or a device where a file is expected; a path too long for the system.
  std::error_code ec;
  const auto status = std::filesystem::status(file, ec);
  if (ec || !std::filesystem::exists(status))
    throw Error(fmt::format(
        "{}: cannot open file{}", shortened(file),
        ec && ec != std::errc::no_such_file_or_directory ? " (" + ec.message() + ")" : ""));
  if (!std::filesystem::is_regular_file(status))
    throw Error(fmt::format("{}: not a regular file (a directory, a pipe or a device?)", file));
  try {
    // Documents are counted up to two: yaml-cpp's LoadAll never ends on some malformed streams
    // (a lone ',' yields empty documents without end, found by scripts/fuzz.sh).
    {
      std::ifstream in(file, std::ios::binary);
      YAML::Parser parser(in);
      DocumentStarts starts;
      for (int n = 0; n < 2 && parser.HandleNextDocument(starts); ++n) {
      }
      if (starts.marks.size() > 1)
        yaml_fail(file, starts.marks[1], "",
                  starts.marks[1].pos == starts.marks[0].pos
                      ? "not YAML the parser can read (a stray ',' or flow indicator?)"
                      : "a second YAML document: a file holds one");
    }
    YAML::Node root = YAML::LoadFile(file);
    check_document(file, root, "");
    return root;
  } catch (const YAML::BadFile&) {
    throw Error(fmt::format("{}: cannot open file", file));
  } catch (const std::ios_base::failure& e) {
    throw Error(fmt::format("{}: cannot read file ({})", file, e.what()));
  } catch (const YAML::ParserException& e) {
    yaml_fail(file, e.mark, "", e.msg);
  }
}

template <typename T>
T yaml_as(const std::string& file, const YAML::Node& n, const std::string& key_path,
          const char* type_name) {
  if (!n.IsScalar())
    yaml_fail(file, n, key_path,
              fmt::format("expected {}, got a {}", type_name,
                          n.IsMap()        ? "mapping"
                          : n.IsSequence() ? "sequence"
                                           : "null"));
  try {
    return n.as<T>();
  } catch (const YAML::Exception&) {
    yaml_fail(file, n, key_path, fmt::format("expected {}, got '{}'", type_name, n.Scalar()));
  }
}

template double yaml_as<double>(const std::string&, const YAML::Node&, const std::string&,
                                const char*);
template int64_t yaml_as<int64_t>(const std::string&, const YAML::Node&, const std::string&,
                                  const char*);
template int yaml_as<int>(const std::string&, const YAML::Node&, const std::string&, const char*);
template bool yaml_as<bool>(const std::string&, const YAML::Node&, const std::string&, const char*);
template std::string yaml_as<std::string>(const std::string&, const YAML::Node&, const std::string&,
                                          const char*);

}  // namespace tpusim
