"""The mlx backend: mlx-lm on a local Hugging Face-style folder, and the conversion of a GGUF
into such a folder (``gguf_to_hf_folder``, once per GGUF under the cache: ``cached_hf_folder``)."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path
from typing import Mapping

from harness.generation.errors import BackendUnavailable, GenerationError
from harness.generation.generator import GenerationConfig, Generator, packaged_model_path
from harness.generation.types import Generation, TokenLogprob, TopLogprob
from harness.io import cache_root, file_lock


class MLXGenerator(Generator):
    """mlx-lm on a local Hugging Face-style folder (config.json, tokenizer, safetensors).

    An mlx-community folder works as downloaded; a GGUF can be turned into such a folder with
    ``gguf_to_hf_folder`` (fp32 weights, top-level ``rope_theta`` that mlx-lm reads).
    """

    backend = "mlx"

    def __init__(self, model: str | os.PathLike, *, config: GenerationConfig | None = None):
        super().__init__(config)
        try:
            import mlx.core as mx
            from mlx_lm import load
            from mlx_lm.generate import generate_step
            from mlx_lm.sample_utils import make_sampler
        except ImportError as e:
            raise BackendUnavailable(
                f"backend mlx needs mlx-lm and mlx (Linux: pip install 'mlx[cpu]' mlx-lm): {e}"
            ) from None
        path = Path(model)
        if not (path.is_dir() and (path / "config.json").is_file()):
            raise GenerationError(
                f"mlx: {path} is not a local model folder with config.json (the harness never "
                "downloads weights; convert a GGUF with gguf_to_hf_folder)"
            )
        self._mx, self._step, self._sampler = mx, generate_step, make_sampler(temp=0.0)
        self.model = path.name
        t0 = time.perf_counter()
        self._lm, self._tok = load(str(path))
        self.load_ms = (time.perf_counter() - t0) * 1000.0
        self._eos = set(self._tok.eos_token_ids)

    def _generate(self, messages: list[dict], max_tokens: int) -> Generation:
        import numpy as np

        mx = self._mx
        ids = self._tok.apply_chat_template(messages, add_generation_prompt=True, tokenize=True)
        if isinstance(ids, Mapping):
            ids = ids["input_ids"]
        ids = list(ids)
        mx.random.seed(self.config.seed)
        k = self.config.top_k
        toks, kept, finish, steps = [], [], "length", 0
        t0 = time.perf_counter()
        gen = self._step(mx.array(ids), self._lm, max_tokens=max_tokens, sampler=self._sampler)
        for (tid, logprobs), _ in zip(gen, range(max_tokens)):
            tid = int(tid)
            steps += 1
            if tid in self._eos:
                finish = "stop"
                break
            lp = np.array(logprobs.astype(mx.float32))
            top_ids = np.argsort(-lp, kind="stable")[:k]
            p = np.exp(lp)
            ent = float(-(p[p > 0] * lp[p > 0]).sum())
            top = tuple(TopLogprob(self._tok.decode([int(t)]), float(lp[t])) for t in top_ids)
            toks.append(TokenLogprob(self._tok.decode([tid]), float(lp[tid]), top, ent))
            kept.append(tid)
        model_ms = (time.perf_counter() - t0) * 1000.0
        return Generation(
            text=self._tok.decode(kept), tokens=tuple(toks), prompt_tokens=len(ids),
            output_tokens=steps, ms=0.0, model_ms=model_ms, finish_reason=finish,
            backend=self.backend, model=self.model,
        )

    def close(self) -> None:
        self._lm = None


def gguf_to_hf_folder(gguf_path: str | os.PathLike, out_dir: str | os.PathLike, *, dtype: str = "float32") -> Path:
    """Write a Hugging Face-style folder (config.json, tokenizer, model.safetensors) from a GGUF.

    transformers reads and dequantises the GGUF (``gguf`` + ``accelerate``); the weights are
    saved with safetensors (transformers refuses ``save_pretrained`` on a GGUF-loaded model),
    tied output weights once; ``config.json`` gets a top-level ``rope_theta`` (transformers 5
    nests it under ``rope_parameters``; mlx-lm reads the top level) and loses the quantisation
    entry and the source path. mlx-lm and ``TransformersGenerator`` both load the result.
    """
    import torch
    from safetensors.torch import save_file
    from transformers import AutoModelForCausalLM, AutoTokenizer

    src = Path(gguf_path)
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    tok = AutoTokenizer.from_pretrained(str(src.parent), gguf_file=src.name)
    lm = AutoModelForCausalLM.from_pretrained(str(src.parent), gguf_file=src.name, dtype=getattr(torch, dtype))
    tied = bool(getattr(lm.config, "tie_word_embeddings", False))
    state = {k: v.detach().contiguous() for k, v in lm.state_dict().items() if not (tied and k == "lm_head.weight")}
    save_file(state, str(out / "model.safetensors"), metadata={"format": "pt"})
    cfg = lm.config.to_dict()
    cfg.pop("quantization_config", None)
    cfg.pop("_name_or_path", None)
    cfg["architectures"] = [type(lm).__name__]
    rope = cfg.get("rope_parameters") or {}
    if cfg.get("rope_theta") is None and rope.get("rope_theta") is not None:
        cfg["rope_theta"] = rope["rope_theta"]
    (out / "config.json").write_text(json.dumps(cfg, indent=1, sort_keys=True))
    tok.save_pretrained(str(out))
    (out / "SOURCE.json").write_text(json.dumps({"gguf": src.name, "bytes": src.stat().st_size, "dtype": dtype}))
    return out


def cached_hf_folder(gguf_path: str | os.PathLike | None = None) -> Path:
    """``gguf_to_hf_folder`` once per GGUF, under the harness cache (``models/``)."""
    src = Path(gguf_path) if gguf_path is not None else packaged_model_path()
    out = cache_root() / "models" / f"{src.stem}-{src.stat().st_size}-hf"
    with file_lock(out.with_suffix(".lock")):
        if not (out / "SOURCE.json").is_file():
            tmp = out.with_name(out.name + ".tmp")
            gguf_to_hf_folder(src, tmp)
            if out.exists():
                import shutil

                shutil.rmtree(out)
            tmp.rename(out)
    return out
