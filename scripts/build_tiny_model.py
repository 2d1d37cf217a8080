#!/usr/bin/env python3
"""Build bootwatch's tiny Llama model from a fixed seed, with no hub download.

Writes a Hugging Face model directory (safetensors, config, generation config, tokenizer, chat template)
that vLLM and `transformers serve` load, and optionally a GGUF file of the same weights for llama.cpp.

* Tokenizer: a byte-level BPE trained with `tokenizers` on a corpus generated here from the seed,
  specials ``<unk> <s> </s> <pad>``, BOS added to every sequence.
* Model: LlamaForCausalLM, hidden 256, 2 layers, 4 heads of 64, 2 KV heads, FFN 512, vocab 4096,
  max_position_embeddings 2048, bf16 on disk (3,278,080 parameters).
* GGUF: written directly with ``gguf.GGUFWriter`` (arch ``llama``, tokenizer ``gpt2`` / pre ``gpt-2``,
  merges, F32 tensors, Q/K permuted as llama.cpp's convert_hf_to_gguf.py does). The converter itself
  would reject this tokenizer's unknown pre-tokenizer hash, hence the direct write.

Needs torch, transformers (5.x), tokenizers, safetensors, and gguf for --gguf. Deterministic: the same
seed and library versions give the same bytes.

Usage: build_tiny_model.py --out DIR [--gguf FILE] [--seed 0]
"""

from __future__ import annotations

import argparse
import json
import os
import random
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

if TYPE_CHECKING:
    import numpy as np
    from tokenizers import Tokenizer
    from transformers import LlamaConfig, LlamaForCausalLM

SPECIAL_TOKENS = ["<unk>", "<s>", "</s>", "<pad>"]
UNK_ID, BOS_ID, EOS_ID, PAD_ID = range(4)

CHAT_TEMPLATE = (
    "{% for message in messages %}"
    "{{ '<|' + message['role'] + '|>\\n' + message['content'] + eos_token + '\\n' }}"
    "{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|assistant|>\\n' }}{% endif %}"
)

_WORDS_TEXT = """
the a an model server start ready load weights token cache engine worker health port request
response error warning info debug memory graph compile kernel thread process device tensor layer
attention batch prompt reply hello world chat user assistant system time second minute log line
is was will be not and or but with from into on at by for of to in out up down fast slow cold warm
open close bind listen wait retry fail crash exit signal stop run build file path config json value
"""
WORDS: tuple[str, ...] = tuple(_WORDS_TEXT.split())


@dataclass(frozen=True)
class Shape:
    """The network's dimensions."""

    vocab_size: int = 4096
    hidden_size: int = 256
    intermediate_size: int = 512
    num_hidden_layers: int = 2
    num_attention_heads: int = 4
    num_key_value_heads: int = 2
    head_dim: int = 64
    max_position_embeddings: int = 2048
    rms_norm_eps: float = 1e-5
    rope_theta: float = 10000.0


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, required=True, help="model directory to write (created)")
    parser.add_argument("--gguf", type=Path, default=None, help="also write a GGUF file of the same weights")
    parser.add_argument("--seed", type=int, default=0, help="seed for the corpus and the weights (default 0)")
    return parser.parse_args(argv)


# --- corpus and tokenizer ------------------------------------------------------------------------------------


SYLLABLES: tuple[str, ...] = tuple(c + v for c in "bcdfghklmnprstvwz" for v in "aeiou")


def make_word(rng: random.Random) -> str:
    """A known word most of the time, else a made-up one of 2-4 syllables (gives the BPE more to merge)."""
    if rng.random() < 0.7:
        return rng.choice(WORDS)
    return "".join(rng.choice(SYLLABLES) for _ in range(rng.randint(2, 4)))


def make_sentence(rng: random.Random) -> str:
    words = [make_word(rng) for _ in range(rng.randint(3, 14))]
    if rng.random() < 0.5:
        words.insert(rng.randrange(len(words) + 1), str(rng.randint(0, 99999)))
    if rng.random() < 0.2:
        words.append(f"{rng.randint(0, 23):02d}:{rng.randint(0, 59):02d}:{rng.randint(0, 59):02d}")
    sentence = " ".join(words)
    return sentence[0].upper() + sentence[1:] + rng.choice([".", ".", "!", "?", ":", ","])


def make_corpus(seed: int, n_lines: int = 4000) -> list[str]:
    """Lines of pseudo-English from a fixed seed, plus every printable ASCII character once."""
    rng = random.Random(seed)
    lines = [make_sentence(rng) for _ in range(n_lines)]
    lines.append("".join(chr(c) for c in range(32, 127)))
    return lines


def train_tokenizer(corpus: list[str], vocab_size: int) -> Tokenizer:
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, processors, trainers

    tokenizer = Tokenizer(models.BPE())
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tokenizer.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        min_frequency=2,
        special_tokens=SPECIAL_TOKENS,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tokenizer.train_from_iterator(corpus, trainer=trainer)
    tokenizer.post_processor = processors.TemplateProcessing(
        single="<s> $A",
        pair="<s> $A <s> $B",
        special_tokens=[("<s>", BOS_ID)],
    )
    for token_id, token in enumerate(SPECIAL_TOKENS):
        if tokenizer.token_to_id(token) != token_id:
            raise RuntimeError(f"special token {token!r} got id {tokenizer.token_to_id(token)}, expected {token_id}")
    return tokenizer


def save_tokenizer(tokenizer: Tokenizer, out: Path) -> None:
    from transformers import PreTrainedTokenizerFast

    wrapped = PreTrainedTokenizerFast(
        tokenizer_object=tokenizer,
        unk_token="<unk>",
        bos_token="<s>",
        eos_token="</s>",
        pad_token="<pad>",
        model_max_length=Shape.max_position_embeddings,
    )
    wrapped.chat_template = CHAT_TEMPLATE
    wrapped.save_pretrained(str(out))
    template_file = out / "chat_template.jinja"
    if not template_file.exists():  # older transformers keep it inside tokenizer_config.json
        template_file.write_text(CHAT_TEMPLATE)


# --- model -----------------------------------------------------------------------------------------------------


def make_config(shape: Shape) -> LlamaConfig:
    from transformers import LlamaConfig

    return LlamaConfig(
        vocab_size=shape.vocab_size,
        hidden_size=shape.hidden_size,
        intermediate_size=shape.intermediate_size,
        num_hidden_layers=shape.num_hidden_layers,
        num_attention_heads=shape.num_attention_heads,
        num_key_value_heads=shape.num_key_value_heads,
        head_dim=shape.head_dim,
        max_position_embeddings=shape.max_position_embeddings,
        rms_norm_eps=shape.rms_norm_eps,
        rope_theta=shape.rope_theta,
        hidden_act="silu",
        tie_word_embeddings=False,
        bos_token_id=BOS_ID,
        eos_token_id=EOS_ID,
        pad_token_id=PAD_ID,
        dtype="bfloat16",
    )


def make_model(config: LlamaConfig, seed: int) -> LlamaForCausalLM:
    import torch
    from transformers import LlamaForCausalLM

    torch.manual_seed(seed)
    model = LlamaForCausalLM(config)
    model = model.to(torch.bfloat16).eval()
    n_params = sum(p.numel() for p in model.parameters())
    print(f"model: LlamaForCausalLM, {n_params:,} parameters", file=sys.stderr)
    return model


def save_model(model: LlamaForCausalLM, out: Path) -> None:
    model.save_pretrained(str(out), safe_serialization=True)
    if not (out / "model.safetensors").exists():
        raise RuntimeError(f"save_pretrained wrote no model.safetensors in {out}: {sorted(os.listdir(out))}")


# --- GGUF ------------------------------------------------------------------------------------------------------


def permute_qk(weights: np.ndarray, n_head: int) -> np.ndarray:
    """Reorder rotary halves as llama.cpp's convert_hf_to_gguf.py LlamaModel.permute does (HF -> GGUF)."""
    return (
        weights.reshape(n_head, 2, weights.shape[0] // n_head // 2, *weights.shape[1:])
        .swapaxes(1, 2)
        .reshape(weights.shape)
    )


def gguf_tensors(model: LlamaForCausalLM, shape: Shape) -> list[tuple[str, np.ndarray]]:
    """The model's weights as float32 arrays under llama.cpp's tensor names."""
    import torch

    state = {name: t.detach().to(torch.float32).numpy() for name, t in model.state_dict().items()}
    tensors = [
        ("token_embd.weight", state["model.embed_tokens.weight"]),
        ("output_norm.weight", state["model.norm.weight"]),
        ("output.weight", state["lm_head.weight"]),
    ]
    for i in range(shape.num_hidden_layers):
        hf = f"model.layers.{i}."
        blk = f"blk.{i}."
        tensors += [
            (blk + "attn_norm.weight", state[hf + "input_layernorm.weight"]),
            (blk + "attn_q.weight", permute_qk(state[hf + "self_attn.q_proj.weight"], shape.num_attention_heads)),
            (blk + "attn_k.weight", permute_qk(state[hf + "self_attn.k_proj.weight"], shape.num_key_value_heads)),
            (blk + "attn_v.weight", state[hf + "self_attn.v_proj.weight"]),
            (blk + "attn_output.weight", state[hf + "self_attn.o_proj.weight"]),
            (blk + "ffn_norm.weight", state[hf + "post_attention_layernorm.weight"]),
            (blk + "ffn_gate.weight", state[hf + "mlp.gate_proj.weight"]),
            (blk + "ffn_up.weight", state[hf + "mlp.up_proj.weight"]),
            (blk + "ffn_down.weight", state[hf + "mlp.down_proj.weight"]),
        ]
    return tensors


def gguf_vocab(tokenizer_json: dict[str, Any], vocab_size: int) -> tuple[list[str], list[int], list[str]]:
    """Tokens padded to the model's vocab size, their types, and the BPE merges, as convert_hf_to_gguf.py does."""
    from gguf import TokenType

    vocab: dict[str, int] = tokenizer_json["model"]["vocab"]
    specials = {t["id"]: t["content"] for t in tokenizer_json.get("added_tokens", []) if t.get("special")}
    by_id = {i: tok for tok, i in vocab.items()} | specials
    tokens: list[str] = []
    types: list[int] = []
    for i in range(vocab_size):
        if i not in by_id:
            tokens.append(f"[PAD{i}]")
            types.append(TokenType.UNUSED)
        else:
            tokens.append(by_id[i])
            types.append(TokenType.CONTROL if i in specials else TokenType.NORMAL)
    merges = [m if isinstance(m, str) else " ".join(m) for m in tokenizer_json["model"]["merges"]]
    return tokens, types, merges


def write_gguf(path: Path, model: LlamaForCausalLM, shape: Shape, tokenizer_json: dict[str, Any]) -> None:
    import gguf

    writer = gguf.GGUFWriter(str(path), arch="llama")
    writer.add_name("bootwatch-tiny-llama")
    writer.add_context_length(shape.max_position_embeddings)
    writer.add_embedding_length(shape.hidden_size)
    writer.add_block_count(shape.num_hidden_layers)
    writer.add_feed_forward_length(shape.intermediate_size)
    writer.add_head_count(shape.num_attention_heads)
    writer.add_head_count_kv(shape.num_key_value_heads)
    writer.add_key_length(shape.head_dim)
    writer.add_value_length(shape.head_dim)
    writer.add_rope_dimension_count(shape.head_dim)
    writer.add_rope_freq_base(shape.rope_theta)
    writer.add_layer_norm_rms_eps(shape.rms_norm_eps)
    writer.add_vocab_size(shape.vocab_size)
    writer.add_file_type(gguf.LlamaFileType.ALL_F32)

    tokens, types, merges = gguf_vocab(tokenizer_json, shape.vocab_size)
    writer.add_tokenizer_model("gpt2")
    writer.add_tokenizer_pre("gpt-2")
    writer.add_token_list(tokens)
    writer.add_token_types(types)
    writer.add_token_merges(merges)
    writer.add_bos_token_id(BOS_ID)
    writer.add_eos_token_id(EOS_ID)
    writer.add_unk_token_id(UNK_ID)
    writer.add_pad_token_id(PAD_ID)
    writer.add_add_bos_token(True)
    writer.add_add_eos_token(False)
    writer.add_chat_template(CHAT_TEMPLATE)

    for name, array in gguf_tensors(model, shape):
        writer.add_tensor(name, array)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()


# --- main ------------------------------------------------------------------------------------------------------


def build(out: Path, gguf_path: Path | None, seed: int) -> None:
    shape = Shape()
    out.mkdir(parents=True, exist_ok=True)
    tokenizer = train_tokenizer(make_corpus(seed), shape.vocab_size)
    print(f"tokenizer: byte-level BPE, {tokenizer.get_vocab_size()} tokens", file=sys.stderr)
    save_tokenizer(tokenizer, out)
    model = make_model(make_config(shape), seed)
    save_model(model, out)
    print(f"wrote {out}: {' '.join(sorted(os.listdir(out)))}", file=sys.stderr)
    if gguf_path is not None:
        gguf_path.parent.mkdir(parents=True, exist_ok=True)
        tokenizer_json = json.loads((out / "tokenizer.json").read_text())
        write_gguf(gguf_path, model, shape, tokenizer_json)
        print(f"wrote {gguf_path}: {gguf_path.stat().st_size:,} bytes", file=sys.stderr)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    build(args.out, args.gguf, args.seed)
    return 0


if __name__ == "__main__":
    sys.exit(main(argv=None))
