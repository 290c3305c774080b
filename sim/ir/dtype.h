// Element types of tensors and their storage sizes.
#pragma once
#include <cstdint>
#include <optional>
#include <string_view>

namespace tpusim {

enum class DType : uint8_t { bf16, f32, s8, s32 };

constexpr int64_t byte_size(DType t) {
  switch (t) {
    case DType::bf16:
      return 2;
    case DType::f32:
      return 4;
    case DType::s8:
      return 1;
    case DType::s32:
      return 4;
  }
  return 4;
}

constexpr std::string_view name(DType t) {
  switch (t) {
    case DType::bf16:
      return "bf16";
    case DType::f32:
      return "f32";
    case DType::s8:
      return "s8";
    case DType::s32:
      return "s32";
  }
  return "?";
}

// The dtype a user-facing name stands for: bf16, f32, int8 (s8) or s32; nothing for another name.
constexpr std::optional<DType> dtype_named(std::string_view n) {
  if (n == "bf16") return DType::bf16;
  if (n == "f32") return DType::f32;
  if (n == "int8" || n == "s8") return DType::s8;
  if (n == "s32") return DType::s32;
  return std::nullopt;
}

}  // namespace tpusim
