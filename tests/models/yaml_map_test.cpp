// The one YAML mapping reader: unknown, missing and mistyped keys are one error line naming
// file:line:column and the key path.
#include "models/yaml_map.h"

#include <gtest/gtest.h>

#include "sim/error.h"
#include "tests/error_of.h"

namespace tpusim {
namespace {

using tpusim::testing::error_of;

YamlMap read(const std::string& text) {
  return YamlMap("f.yaml", YAML::Load(text), "", {"a", "b", "rows", "sub"});
}

TEST(YamlMap, ReadsKnownKeysWithTypesAndDefaults) {
  const YamlMap m = read("a: 3\nb: x\nsub: {c: 2.5}\n");
  EXPECT_EQ(m.positive("a"), 3);
  EXPECT_EQ(m.string("b"), "x");
  EXPECT_EQ(m.positive("rows", 7), 7);
  EXPECT_EQ(m.string("rows", "none"), "none");
  EXPECT_EQ(m.map("sub", {"c"}).positive_number("c"), 2.5);
  EXPECT_EQ(m.choice("b", {"x", "y"}), "x");
}

TEST(YamlMap, ErrorsNameFileLineColumnAndKeyPath) {
  EXPECT_EQ(error_of([] { read("a: 1\nzz: 2\n"); }),
            "f.yaml:2:1: key 'zz': unknown key (known: a, b, rows, sub)");
  EXPECT_EQ(error_of([] { read("a: 1\n").string("b"); }), "f.yaml:1:1: key 'b': missing");
  EXPECT_EQ(error_of([] { read("a: 0\n").positive("a"); }),
            "f.yaml:1:4: key 'a': must be a positive integer, got 0");
  EXPECT_EQ(error_of([] { read("a: many\n").positive("a"); }),
            "f.yaml:1:4: key 'a': expected an integer, got 'many'");
  EXPECT_EQ(error_of([] {
              read("b: z\n").choice("b", {"x", "y"});
            }),
            "f.yaml:1:4: key 'b': expected x or y, got 'z'");
  EXPECT_EQ(error_of([] { read("sub: {c: 1, d: 2}\n").map("sub", {"c"}); }),
            "f.yaml:1:13: key 'sub.d': unknown key (known: c)");
  EXPECT_EQ(error_of([] { read("sub: [1]\n").map("sub", {"c"}); }),
            "f.yaml:1:6: key 'sub': expected a mapping");
  EXPECT_EQ(error_of([] { read("a: .nan\n").positive_number("a"); }),
            "f.yaml:1:4: key 'a': must be a positive finite number, got .nan");
}

TEST(YamlMap, ANonScalarKeyIsAnErrorNotACrash) {
  EXPECT_EQ(error_of([] { read("? [a, b]\n: 1\n"); }),
            "f.yaml:1:3: key '?': expected a string key, got a sequence");
}

TEST(YamlMap, ListsOfMappingsHaveIndexedPaths) {
  const YamlMap m = read("rows:\n  - {a: 1}\n  - {a: 2, q: 3}\n");
  EXPECT_EQ(error_of([&] { m.list("rows", {"a"}); }),
            "f.yaml:3:12: key 'rows[1].q': unknown key (known: a)");
  EXPECT_EQ(read("rows:\n  - {a: 1}\n").list("rows", {"a"}).at(0).positive("a"), 1);
  EXPECT_EQ(error_of([] { read("rows:\n  - {a: 1}\n").list("rows", {"a"}, 2); }),
            "f.yaml:2:3: key 'rows': expected a list of at least 2 entries");
}

}  // namespace
}  // namespace tpusim
