// MaxText's key names and tpusim's, shared by `tpusim import maxtext` (maxtext_config.cpp) and
// `tpusim export maxtext` (maxtext_export.cpp).
#pragma once
#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

namespace tpusim::maxtext_keys {

// Model config keys tpusim reads, and what they become.
inline const std::map<std::string, std::string> kModelKeys = {{"base_emb_dim", "d_model"},
                                                              {"base_num_query_heads", "q_heads"},
                                                              {"base_num_kv_heads", "kv_heads"},
                                                              {"base_mlp_dim", "mlp_dim"},
                                                              {"base_num_decoder_layers", "layers"},
                                                              {"head_dim", "head_dim"},
                                                              {"vocab_size", "vocab"}};

// Multi-head latent attention's keys (attention_type: mla) with base.yml's defaults (L542-546),
// in the order of MlaDims.
inline const std::vector<std::pair<std::string, int64_t>> kMlaKeys = {{"q_lora_rank", 0},
                                                                      {"kv_lora_rank", 512},
                                                                      {"qk_nope_head_dim", 128},
                                                                      {"qk_rope_head_dim", 64},
                                                                      {"v_head_dim", 128}};

// MaxText's mixture-of-experts keys and ours under `moe:` (one expert: a dense model).
inline const std::map<std::string, std::string> kMoeKeys = {{"num_experts", "experts"},
                                                            {"num_experts_per_tok", "top_k"},
                                                            {"base_moe_mlp_dim", "mlp_dim"},
                                                            {"shared_experts", "shared"}};

}  // namespace tpusim::maxtext_keys
