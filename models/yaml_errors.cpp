#include "models/yaml_errors.h"

#include <fmt/format.h>
#include <yaml-cpp/eventhandler.h>

#include <cstdint>
#include <set>
#include <sstream>
#include <vector>

#include "sim/error.h"
#include "sim/text_file.h"

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
    yaml_fail(
        file, n, shortened(path),
        fmt::format("nested deeper than {} levels (an alias that contains itself?)", kMaxDepth));
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

// Where each document of a stream starts, read without building the documents. On the way, each
// quoted scalar is checked for its closing quote: yaml-cpp accepts `"text` followed by a line
// break at the end of the file as if the quote were closed.
class DocumentStarts : public YAML::EventHandler {
 public:
  DocumentStarts(const std::string& file, const std::string& text) : file_(file), text_(text) {}
  std::vector<YAML::Mark> marks;
  void OnDocumentStart(const YAML::Mark& mark) override { marks.push_back(mark); }
  void OnDocumentEnd() override {}
  void OnNull(const YAML::Mark&, YAML::anchor_t) override {}
  void OnAlias(const YAML::Mark&, YAML::anchor_t) override {}
  void OnScalar(const YAML::Mark& mark, const std::string&, YAML::anchor_t,
                const std::string&) override {
    if (mark.pos >= 0 && !closed_quote(static_cast<size_t>(mark.pos)))
      yaml_fail(file_, mark, "",
                "the file ends inside a quoted string (a closing quote is missing)");
  }
  void OnSequenceStart(const YAML::Mark&, const std::string&, YAML::anchor_t,
                       YAML::EmitterStyle::value) override {}
  void OnSequenceEnd() override {}
  void OnMapStart(const YAML::Mark&, const std::string&, YAML::anchor_t,
                  YAML::EmitterStyle::value) override {}
  void OnMapEnd() override {}

 private:
  // True unless a quoted scalar starts at `at` and the text ends before its closing quote
  // (`\"` escapes it in double quotes, `''` in single quotes).
  bool closed_quote(size_t at) const {
    if (at >= text_.size() || (text_[at] != '"' && text_[at] != '\'')) return true;
    const char quote = text_[at];
    for (size_t i = at + 1; i < text_.size(); ++i) {
      if (quote == '"' && text_[i] == '\\') {
        ++i;
      } else if (text_[i] == quote) {
        if (quote == '\'' && i + 1 < text_.size() && text_[i + 1] == '\'') {
          ++i;
          continue;
        }
        return true;
      }
    }
    return false;
  }
  const std::string& file_;
  const std::string& text_;
};

// yaml-cpp's parser messages (yaml-cpp/exceptions.h) in the words of someone editing the file.
// Messages that end in ": " are followed by the offending text, kept. Unknown ones pass through.
std::string plain_words(const std::string& message) {
  namespace M = YAML::ErrorMsg;
  static const std::vector<std::pair<const char*, const char*>> kPlain = {
      {M::TAB_IN_INDENTATION, "a tab in the indentation: YAML indents with spaces only"},
      {M::END_OF_MAP_FLOW, "a '{' is not closed by '}'"},
      {M::END_OF_MAP, "this line does not continue the mapping above it: check its indentation"},
      {M::END_OF_SEQ_FLOW, "a '[' is not closed by ']'"},
      {M::END_OF_SEQ, "this line does not continue the list above it: check its indentation"},
      {M::FLOW_END, "a ']' or '}' without its opening bracket"},
      {M::BLOCK_ENTRY, "a list entry ('- ') where a key was expected: check the indentation"},
      {M::MAP_KEY, "a key where none may start: check the indentation"},
      {M::MAP_VALUE,
       "a ': ' where no value may start (quote a value that contains ': ', or check the "
       "indentation)"},
      {M::INVALID_ESCAPE,
       "an unknown escape in a double-quoted string (write \\\\ for a backslash, or use single "
       "quotes); the character after the backslash: "},
      {M::INVALID_HEX, "a \\x, \\u or \\U escape with a character that is not a hex digit"},
      {M::INVALID_UNICODE, "an escape that names no Unicode character: "},
      {M::EOF_IN_SCALAR, "the file ends inside a quoted string (a closing quote is missing)"},
      {M::DOC_IN_SCALAR, "a document marker ('---' or '...') inside a quoted string"},
      {M::CHAR_IN_SCALAR, "a character that cannot appear here in a plain value (quote the value)"},
      {M::SINGLE_QUOTED_CHAR, "a character that cannot appear in a single-quoted string"},
      {M::UNKNOWN_TOKEN, "a character that cannot start anything here"},
      {M::UNKNOWN_ANCHOR, "an alias ('*name') whose anchor ('&name') is not defined above it"},
      {M::ALIAS_NOT_FOUND, "a '*' without an alias name after it"},
      {M::ANCHOR_NOT_FOUND, "a '&' without an anchor name after it"},
      {M::CHAR_IN_ALIAS, "a character that cannot appear in an alias name ('*name')"},
      {M::CHAR_IN_ANCHOR, "a character that cannot appear in an anchor name ('&name')"},
      {M::ALIAS_CONTENT, "an alias ('*name') with content of its own: an alias stands alone"},
      {M::MULTIPLE_TAGS, "two tags ('!...') on one value"},
      {M::MULTIPLE_ANCHORS, "two anchors ('&...') on one value"},
      {M::MULTIPLE_ALIASES, "two aliases ('*...') on one value"},
      {M::ZERO_INDENT_IN_BLOCK, "a block text ('|' or '>') with an indentation of 0"},
      {M::CHAR_IN_BLOCK, "a character that cannot follow '|' or '>' on its line"},
      {M::CHAR_IN_TAG_HANDLE, "a malformed tag ('!...')"},
      {M::TAG_WITH_NO_SUFFIX, "a tag ('!...') without a name"},
      {M::END_OF_VERBATIM_TAG, "a tag '!<...' without its closing '>'"},
      {M::YAML_DIRECTIVE_ARGS, "a malformed %YAML directive"},
      {M::YAML_VERSION, "a %YAML directive with a version that is not a number: "},
      {M::YAML_MAJOR_VERSION, "a %YAML directive for a YAML version after 1.x"},
      {M::REPEATED_YAML_DIRECTIVE, "a second %YAML directive"},
      {M::TAG_DIRECTIVE_ARGS, "a malformed %TAG directive"},
      {M::REPEATED_TAG_DIRECTIVE, "a %TAG directive given twice"},
  };
  for (const auto& [library, plain] : kPlain) {
    const std::string prefix = library;
    if (message.rfind(prefix, 0) != 0) continue;
    return std::string(plain) + message.substr(prefix.size());
  }
  return message;
}

}  // namespace

YAML::Node yaml_load_file(const std::string& file) {
  const std::string text = read_text_file(file);
  try {
    // Documents are counted up to two: yaml-cpp's LoadAll never ends on some malformed streams
    // (a lone ',' yields empty documents without end, found by scripts/fuzz.sh).
    {
      std::istringstream in(text);
      YAML::Parser parser(in);
      DocumentStarts starts(file, text);
      for (int n = 0; n < 2 && parser.HandleNextDocument(starts); ++n) {
      }
      if (starts.marks.size() > 1)
        yaml_fail(file, starts.marks[1], "",
                  starts.marks[1].pos == starts.marks[0].pos
                      ? "not YAML the parser can read (a stray ',' or flow indicator?)"
                      : "a second YAML document: a file holds one");
    }
    YAML::Node root = YAML::Load(text);
    check_document(file, root, "");
    return root;
  } catch (const YAML::ParserException& e) {
    yaml_fail(file, e.mark, "", plain_words(e.msg));
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
