#include "app/hlo_text.h"

#include <fmt/format.h>

#include <cctype>
#include <sstream>

#include "app/gzip_file.h"
#include "sim/error.h"

namespace tpusim {

int64_t hlo_dtype_bytes(const std::string& t) {
  if (t == "pred" || t == "s8" || t == "u8" || t == "s4" || t == "u4" || t.rfind("f8", 0) == 0)
    return 1;
  if (t == "s16" || t == "u16" || t == "f16" || t == "bf16") return 2;
  if (t == "s32" || t == "u32" || t == "f32") return 4;
  if (t == "s64" || t == "u64" || t == "f64" || t == "c64") return 8;
  if (t == "c128") return 16;
  return 0;  // token
}

int64_t HloShape::elements() const {
  int64_t n = 1;
  for (int64_t d : dims) n *= d;
  return n;
}

int64_t HloShape::bytes() const {
  if (!is_tuple()) return elements() * hlo_dtype_bytes(dtype);
  int64_t b = 0;
  for (const HloShape& s : tuple) b += s.bytes();
  return b;
}

std::string HloInstruction::attr(const std::string& key) const {
  auto it = attrs.find(key);
  return it == attrs.end() ? "" : it->second;
}

std::string HloInstruction::op_name() const {
  const std::string m = attr("metadata");
  const auto at = m.find("op_name=\"");
  if (at == std::string::npos) return "";
  const auto start = at + 9;
  return m.substr(start, m.find('"', start) - start);
}

const HloInstruction& HloComputation::root() const {
  for (const HloInstruction& i : instructions)
    if (i.root) return i;
  return instructions.back();
}

const HloInstruction* HloComputation::find(const std::string& name) const {
  auto it = index.find(name);
  return it == index.end() ? nullptr : &instructions[it->second];
}

const HloComputation& HloModule::entry() const {
  for (const HloComputation& c : computations)
    if (c.entry) return c;
  throw Error(fmt::format("{}: the HLO module has no ENTRY computation", file));
}

const HloComputation& HloModule::computation(const std::string& name) const {
  const std::string n = !name.empty() && name[0] == '%' ? name.substr(1) : name;
  auto it = index.find(n);
  if (it == index.end())
    throw Error(fmt::format("{}: the HLO module has no computation '{}'", file, n));
  return computations[it->second];
}

namespace {

// One character of bracketed text: +1 for an opening bracket, -1 for a closing one, else 0;
// brackets inside quoted strings do not count, and `i` steps over an escaped character there.
int bracket_delta(const std::string& s, size_t& i, bool& quoted) {
  const char c = s[i];
  if (quoted) {
    if (c == '\\')
      ++i;
    else if (c == '"')
      quoted = false;
    return 0;
  }
  if (c == '"') {
    quoted = true;
    return 0;
  }
  if (c == '(' || c == '{' || c == '[') return 1;
  return c == ')' || c == '}' || c == ']' ? -1 : 0;
}

// A cursor over one line; errors name FILE:LINE:COLUMN.
class LineReader {
 public:
  LineReader(const std::string& file, int line, const std::string& text)
      : file_(file), line_(line), s_(text) {}

  [[noreturn]] void fail(const std::string& what) const {
    throw Error(fmt::format("{}:{}:{}: {}", file_, line_, pos_ + 1, what));
  }
  bool done() const { return pos_ >= s_.size(); }
  char peek() const { return done() ? '\0' : s_[pos_]; }
  bool eat(const std::string& token) {
    skip_spaces();
    if (s_.compare(pos_, token.size(), token) != 0) return false;
    pos_ += token.size();
    return true;
  }
  void expect(const std::string& token) {
    if (!eat(token)) fail(fmt::format("expected '{}'", token));
  }
  void skip_spaces() {
    while (!done() && (s_[pos_] == ' ' || s_[pos_] == '\t')) ++pos_;
    // Comments such as /*index=5*/ between tuple elements and operands.
    if (s_.compare(pos_, 2, "/*") == 0) {
      const auto end = s_.find("*/", pos_);
      if (end == std::string::npos) fail("unterminated comment");
      pos_ = end + 2;
      skip_spaces();
    }
  }
  // Letters, digits and . _ - (HLO names, opcodes, dtypes).
  std::string word() {
    skip_spaces();
    const size_t start = pos_;
    while (!done() && (std::isalnum(static_cast<unsigned char>(s_[pos_])) || s_[pos_] == '_' ||
                       s_[pos_] == '.' || s_[pos_] == '-'))
      ++pos_;
    return s_.substr(start, pos_ - start);
  }
  // Text up to the bracket closing the one just read (nesting (), {}, [] and quotes); `close`
  // names it in the error.
  std::string balanced(char close) {
    const size_t start = pos_;
    int depth = 1;
    bool quoted = false;
    for (; !done(); ++pos_)
      if ((depth += bracket_delta(s_, pos_, quoted)) == 0) return s_.substr(start, pos_++ - start);
    fail(fmt::format("no '{}' closes this", close));
  }

  HloShape shape() {
    skip_spaces();
    HloShape sh;
    if (eat("(")) {
      if (eat(")")) return sh;
      do sh.tuple.push_back(shape());
      while (eat(","));
      expect(")");
      return sh;
    }
    sh.dtype = word();
    if (sh.dtype.empty() || (hlo_dtype_bytes(sh.dtype) == 0 && sh.dtype != "token"))
      fail(fmt::format("expected a shape such as f32[8,128], found '{}'", sh.dtype));
    expect("[");
    const std::string dims = balanced(']');
    std::stringstream ds(dims);
    for (std::string d; std::getline(ds, d, ',');) {
      if (d.empty()) continue;
      try {
        sh.dims.push_back(std::stoll(d[0] == '<' && d.size() > 1 ? d.substr(2) : d));
      } catch (const std::exception&) {
        fail(fmt::format("dimension '{}' is not a number", d));
      }
    }
    if (peek() == '{') {
      ++pos_;
      const std::string layout = balanced('}');
      if (!layout.empty() && std::isdigit(static_cast<unsigned char>(layout[0])))
        sh.minor = std::atoi(layout.c_str());
      const auto s = layout.find("S(");
      if (s != std::string::npos) sh.memory_space = std::atoi(layout.c_str() + s + 2);
    }
    return sh;
  }

  // Comma-separated items at the top level of `text` (not inside brackets or quotes).
  static std::vector<std::string> split_top(const std::string& text) {
    std::vector<std::string> out;
    int depth = 0;
    bool quoted = false;
    std::string cur;
    for (size_t i = 0; i < text.size(); ++i) {
      const char c = text[i];
      if (quoted) {
        if (c == '"' && text[i - 1] != '\\') quoted = false;
      } else if (c == '"') {
        quoted = true;
      } else if (c == '(' || c == '{' || c == '[') {
        ++depth;
      } else if (c == ')' || c == '}' || c == ']') {
        --depth;
      } else if (c == ',' && depth == 0) {
        out.push_back(cur);
        cur.clear();
        continue;
      }
      cur += c;
    }
    if (!cur.empty()) out.push_back(cur);
    for (std::string& s : out) {
      const auto a = s.find_first_not_of(' '), b = s.find_last_not_of(' ');
      s = a == std::string::npos ? "" : s.substr(a, b - a + 1);
    }
    return out;
  }

  std::string rest() const { return s_.substr(std::min(pos_, s_.size())); }
  size_t pos() const { return pos_; }

 private:
  std::string file_;
  int line_;
  std::string s_;
  size_t pos_ = 0;
};

// "%a" or "f32[2]{0} %a" or "a": the operand's name.
std::string operand_name(const std::string& text) {
  // The name follows the operand's shape, if printed, and XLA's /*index=5*/ comment every fifth.
  const auto sp = text.find_last_of(" /");
  std::string n = sp == std::string::npos ? text : text.substr(sp + 1);
  return !n.empty() && n[0] == '%' ? n.substr(1) : n;
}

HloInstruction parse_instruction(LineReader& r, int line) {
  HloInstruction in;
  in.line = line;
  in.root = r.eat("ROOT ");
  r.eat("%");
  in.name = r.word();
  if (in.name.empty()) r.fail("expected an instruction name");
  r.expect("=");
  in.shape = r.shape();
  in.opcode = r.word();
  if (in.opcode.empty()) r.fail("expected an opcode");
  r.expect("(");
  const std::string operands = r.balanced(')');
  if (in.opcode == "constant" || in.opcode == "iota" || in.opcode == "parameter")
    in.literal = operands;
  else
    for (const std::string& o : LineReader::split_top(operands))
      if (!o.empty()) in.operands.push_back(operand_name(o));
  if (r.eat(",")) {
    for (const std::string& a : LineReader::split_top(r.rest())) {
      const auto eq = a.find('=');
      if (eq == std::string::npos) continue;
      in.attrs[a.substr(0, eq)] = a.substr(eq + 1);
    }
  }
  return in;
}

// How many brackets `line` leaves open, outside quoted strings: XLA prints some attribute values
// (a Pallas kernel's frontend `kernel_metadata`) with raw newlines inside their braces.
int open_brackets(const std::string& line) {
  int depth = 0;
  bool quoted = false;
  for (size_t i = 0; i < line.size(); ++i) depth += bracket_delta(line, i, quoted);
  return depth;
}

}  // namespace

HloModule parse_hlo(const std::string& text, const std::string& file) {
  HloModule m;
  m.file = file;
  std::stringstream in(text);
  std::string line;
  HloComputation* cur = nullptr;
  for (int n = 1; std::getline(in, line); ++n) {
    if (!line.empty() && line.back() == '\r') line.pop_back();
    LineReader r(file, n, line);
    if (cur == nullptr) {
      if (r.eat("HloModule ")) {
        m.name = r.word();
        continue;
      }
      const bool entry = r.eat("ENTRY ");
      const bool named = r.eat("%") || entry;
      if (!named || line.empty() || line.back() != '{') continue;  // FileNames, StackFrames, ...
      HloComputation c;
      c.name = r.word();
      c.entry = entry;
      if (c.name.empty()) r.fail("expected a computation name");
      m.index[c.name] = m.computations.size();
      m.computations.push_back(std::move(c));
      cur = &m.computations.back();
      continue;
    }
    if (line.find_first_not_of(' ') == std::string::npos) continue;
    if (line == "}") {
      if (cur->instructions.empty()) r.fail(fmt::format("computation '{}' is empty", cur->name));
      cur = nullptr;
      continue;
    }
    const int first_line = n;
    for (std::string more; open_brackets(line) > 0;) {
      const auto before = in.tellg();
      if (!std::getline(in, more)) break;
      if (!more.empty() && more.back() == '\r') more.pop_back();
      if (more == "}") {  // the computation's end: never part of an instruction
        in.seekg(before);
        break;
      }
      line += "\n" + more;
      ++n;
    }
    LineReader whole(file, first_line, line);
    HloInstruction i = parse_instruction(whole, first_line);
    cur->index[i.name] = cur->instructions.size();
    cur->instructions.push_back(std::move(i));
  }
  if (cur != nullptr)
    throw Error(fmt::format("{}: computation '{}' is not closed by '}}'", file, cur->name));
  if (m.computations.empty()) throw Error(fmt::format("{}: no HLO computations", file));
  return m;
}

HloModule load_hlo(const std::string& file) { return parse_hlo(read_maybe_gzipped(file), file); }

}  // namespace tpusim
