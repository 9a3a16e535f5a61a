"""The model: token ids in, logits out. Knows nothing of schemas, JSON or pydantic.

config      ModelConfig from config.json (ours and transformers' Qwen3.5-MoE)
model       hybrid Gated DeltaNet / gated attention / MoE network, three masking modes
gated_delta the Gated DeltaNet scans (recurrent reference, chunked, FLA on CUDA)
cache       prefix cache: attention KV and Gated DeltaNet conv + recurrent state
checkpoint  Hugging Face style directories: memory-mapped safetensors load and save
tokenizer   a `tokenizers` wrapper that can hand its vocabulary to outlines-core
"""
