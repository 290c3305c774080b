#include "gui/script.h"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <map>
#include <sstream>

#include "sim/error.h"
#include "sim/text_file.h"

namespace tpusim::gui {

namespace {

// Frames a step takes: pressing and releasing take one frame each, a drag moves over several.
constexpr int kDragFrames = 6;

const std::map<std::string, std::pair<ScriptStep::Kind, int>> kSteps = {
    {"move", {ScriptStep::Kind::move, 2}},
    {"click", {ScriptStep::Kind::click, 2}},
    {"drag", {ScriptStep::Kind::drag, 4}},
    {"wheel", {ScriptStep::Kind::wheel, 1}},
    {"key", {ScriptStep::Kind::key, 0}},
    {"type", {ScriptStep::Kind::type, 0}},
    {"wait", {ScriptStep::Kind::wait, 1}},
    {"screenshot", {ScriptStep::Kind::screenshot, 0}}};

int frames_of(const ScriptStep& s) {
  switch (s.kind) {
    case ScriptStep::Kind::click:
    case ScriptStep::Kind::key:
    case ScriptStep::Kind::type:
      return 3;  // press, release, one more to draw the result
    case ScriptStep::Kind::drag:
      return kDragFrames + 2;
    case ScriptStep::Kind::wait:
      return std::max(1, static_cast<int>(s.numbers[0]));
    default:
      return 2;
  }
}

// The key index Dear ImGui 1.86 sees from the GLFW backend: GLFW's key code, which for letters
// and digits is their (upper-case) ASCII.
int key_index(const std::string& k) { return std::toupper(static_cast<unsigned char>(k[0])); }

}  // namespace

std::vector<ScriptStep> load_script(const std::string& file) {
  std::istringstream in(read_text_file(file));
  std::vector<ScriptStep> steps;
  std::string text;
  for (int line = 1; std::getline(in, text); ++line) {
    text = text.substr(0, text.find('#'));
    std::istringstream words(text);
    std::string verb;
    if (!(words >> verb)) continue;
    const auto known = kSteps.find(verb);
    if (known == kSteps.end())
      throw Error(
          fmt::format("{}:{}: unknown step '{}' (known: click, drag, key, move, "
                      "screenshot, type, wait, wheel)",
                      file, line, verb));
    ScriptStep s{.kind = known->second.first, .line = line};
    for (float x; static_cast<int>(s.numbers.size()) < known->second.second && words >> x;)
      s.numbers.push_back(x);
    if (known->second.second == 0) words >> s.text;
    std::string extra;
    const bool complete = static_cast<int>(s.numbers.size()) == known->second.second &&
                          (known->second.second > 0 || !s.text.empty());
    if (!complete || words >> extra)
      throw Error(fmt::format("{}:{}: '{}' takes {}", file, line, verb,
                              known->second.second > 0
                                  ? fmt::format("{} numbers", known->second.second)
                                  : std::string(verb == "key"    ? "a letter or digit"
                                                : verb == "type" ? "a text"
                                                                 : "a path")));
    if (s.kind == ScriptStep::Kind::key &&
        (s.text.size() != 1 || !std::isalnum(static_cast<unsigned char>(s.text[0]))))
      throw Error(fmt::format("{}:{}: key '{}': expected a letter or digit", file, line, s.text));
    steps.push_back(s);
  }
  return steps;
}

void ScriptPlayer::before_frame(ImGuiIO& io) {
  shot_.clear();
  io.MouseDown[0] = false;
  io.MouseWheel = 0;
  if (done()) {
    io.MousePos = mouse_;
    return;
  }
  const ScriptStep& s = steps_[step_];
  const auto& n = s.numbers;
  switch (s.kind) {
    case ScriptStep::Kind::move:
      mouse_ = ImVec2(n[0], n[1]);
      break;
    case ScriptStep::Kind::click:
      mouse_ = ImVec2(n[0], n[1]);
      io.MouseDown[0] = frame_ == 1;
      break;
    case ScriptStep::Kind::drag: {
      const float t = std::clamp(static_cast<float>(frame_ - 1) / kDragFrames, 0.0f, 1.0f);
      mouse_ = ImVec2(n[0] + t * (n[2] - n[0]), n[1] + t * (n[3] - n[1]));
      io.MouseDown[0] = frame_ >= 1 && frame_ <= kDragFrames;
      break;
    }
    case ScriptStep::Kind::wheel:
      if (frame_ == 0) io.MouseWheel = n[0];
      break;
    case ScriptStep::Kind::key:
      io.KeysDown[key_index(s.text)] = frame_ == 0;
      break;
    case ScriptStep::Kind::type:
      if (frame_ == 0)
        for (char c : s.text) io.AddInputCharacter(static_cast<unsigned char>(c));
      io.KeysDown[io.KeyMap[ImGuiKey_Enter]] = frame_ == 1;
      break;
    case ScriptStep::Kind::screenshot:
      shot_ = s.text;
      break;
    case ScriptStep::Kind::wait:
      break;
  }
  io.MousePos = mouse_;
}

void ScriptPlayer::after_frame() {
  if (done()) return;
  if (++frame_ >=
      (steps_[step_].kind == ScriptStep::Kind::screenshot ? 1 : frames_of(steps_[step_]))) {
    ++step_;
    frame_ = 0;
  }
}

}  // namespace tpusim::gui
