"""The transformers backend: transformers + torch (fp32 by default) on a local GGUF or model
folder; it also returns the exact full-vocabulary entropy per token."""

from __future__ import annotations

import importlib.util
import os
import time
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, Sequence

from harness.generation.errors import BackendUnavailable, GenerationError
from harness.generation.generator import GenerationConfig, Generator, check_messages, packaged_model_path
from harness.generation.types import Generation, TokenLogprob, TopLogprob

if TYPE_CHECKING:
    import numpy as np


def _topk_and_entropy(logits_row, k: int):
    """log_softmax in fp32 -> (top-k values, top-k ids, exact entropy in nats)."""
    import torch

    lp = torch.log_softmax(logits_row.float(), dim=-1)
    vals, ids = torch.topk(lp, k)
    p = lp.exp()
    ent = -torch.where(p > 0, p * lp, torch.zeros_like(p)).sum()
    return lp, vals.tolist(), ids.tolist(), float(ent)


class TransformersGenerator(Generator):
    """transformers + torch (CPU, fp32 by default) on a local GGUF file or model folder.

    A GGUF is dequantised to ``dtype`` by transformers (needs the ``gguf`` and ``accelerate``
    packages). ``batch_size`` > 1 makes ``generate_batch`` pad prompts on the left and decode
    them together; padding changes the arithmetic, so outputs may differ in the last bits from
    ``batch_size=1`` (the default).
    """

    backend = "transformers"

    def __init__(
        self,
        model: str | os.PathLike | None = None,
        *,
        config: GenerationConfig | None = None,
        dtype: str = "float32",
        batch_size: int = 1,
        device: str = "cpu",
    ):
        super().__init__(config)
        try:
            import torch
            from transformers import AutoModelForCausalLM, AutoTokenizer
        except ImportError:
            raise BackendUnavailable("backend transformers needs torch and transformers") from None
        path = Path(model) if model is not None else packaged_model_path()
        if path.is_file() and path.suffix.lower() == ".gguf":
            where, kw = str(path.parent), {"gguf_file": path.name}
            for pkg in ("gguf", "accelerate"):
                if importlib.util.find_spec(pkg) is None:
                    raise BackendUnavailable(f"loading a GGUF with transformers needs: pip install {pkg}")
        elif path.is_dir():
            where, kw = str(path), {"local_files_only": True}
        else:
            raise GenerationError(
                f"transformers: {path} is neither a local .gguf file nor a model folder "
                "(the harness never downloads weights)"
            )
        self.model = path.name
        self.batch_size = max(1, int(batch_size))
        self._torch = torch
        t0 = time.perf_counter()
        self._tok = AutoTokenizer.from_pretrained(where, **kw)
        self._lm = AutoModelForCausalLM.from_pretrained(where, dtype=getattr(torch, dtype), **kw)
        self.device = str(device)
        self._lm.to(self.device)
        self._lm.eval()
        self.load_ms = (time.perf_counter() - t0) * 1000.0
        eos = self._lm.generation_config.eos_token_id
        if eos is None:
            eos = self._tok.eos_token_id
        self._eos = set(eos if isinstance(eos, (list, tuple)) else [eos])
        self._pad = self._tok.pad_token_id if self._tok.pad_token_id is not None else min(self._eos)

    def _encode(self, messages: list[dict]) -> list[int]:
        enc = self._tok.apply_chat_template(messages, add_generation_prompt=True, tokenize=True, return_dict=True)
        return list(enc["input_ids"])

    def _run(self, batch: list[list[dict]], max_tokens: int) -> list[Generation]:
        torch = self._torch
        encoded = [self._encode(m) for m in batch]
        width = max(len(e) for e in encoded)
        ids = torch.full((len(batch), width), self._pad, dtype=torch.long)
        mask = torch.zeros((len(batch), width), dtype=torch.long)
        for i, e in enumerate(encoded):  # left padding
            ids[i, width - len(e):] = torch.tensor(e)
            mask[i, width - len(e):] = 1
        torch.manual_seed(self.config.seed)
        t0 = time.perf_counter()
        with torch.inference_mode():
            out = self._lm.generate(
                input_ids=ids.to(self.device), attention_mask=mask.to(self.device), max_new_tokens=max_tokens,
                do_sample=False,
                temperature=None, top_p=None, top_k=None, output_logits=True,
                return_dict_in_generate=True, pad_token_id=self._pad, eos_token_id=sorted(self._eos),
            )
        model_ms = (time.perf_counter() - t0) * 1000.0 / len(batch)
        results = []
        k = self.config.top_k
        for b, e in enumerate(encoded):
            new = out.sequences[b, width:].tolist()
            toks, kept, finish, steps = [], [], "length", 0
            for s, tid in enumerate(new):
                steps = s + 1
                if tid in self._eos:
                    finish = "stop"
                    break
                lp, vals, tids, ent = _topk_and_entropy(out.logits[s][b].cpu(), k)
                top = tuple(TopLogprob(self._tok.decode([t]), float(v)) for t, v in zip(tids, vals))
                toks.append(TokenLogprob(self._tok.decode([tid]), float(lp[tid]), top, ent))
                kept.append(tid)
            results.append(Generation(
                text=self._tok.decode(kept, skip_special_tokens=True),
                tokens=tuple(toks), prompt_tokens=len(e), output_tokens=steps, ms=0.0,
                model_ms=model_ms, finish_reason=finish, backend=self.backend, model=self.model,
            ))
        return results

    def _generate(self, messages: list[dict], max_tokens: int) -> Generation:
        return self._run([messages], max_tokens)[0]

    def generate_batch(self, prompts: Sequence[Any], *, max_tokens: int | None = None) -> list[Generation]:
        if self.batch_size == 1 or len(prompts) < 2:
            return super().generate_batch(prompts, max_tokens=max_tokens)
        n = self.config.max_tokens if max_tokens is None else int(max_tokens)
        msgs = [check_messages(p) for p in prompts]
        out: list[Generation] = []
        for i in range(0, len(msgs), self.batch_size):
            t0 = time.perf_counter()
            chunk = self._run(msgs[i:i + self.batch_size], n)
            ms = (time.perf_counter() - t0) * 1000.0 / len(chunk)
            out.extend(replace(g, ms=ms) for g in chunk)
        return out

    def final_hidden_state(self, messages: Sequence[Any]) -> np.ndarray:
        """The base model's ``last_hidden_state`` (after the final norm: what the LM head reads)
        at the last token of the prompt with the chat template's generation prompt; one prompt
        per forward pass (no padding), float32 (``harness.generation.hidden_state``)."""
        torch = self._torch
        ids = torch.tensor([self._encode(check_messages(messages))], dtype=torch.long, device=self.device)
        with torch.inference_mode():
            out = self._lm.model(input_ids=ids)
        return out.last_hidden_state[0, -1].float().cpu().numpy()

    def describe(self) -> dict:
        return {**super().describe(), "dtype": str(self._lm.dtype), "batch_size": self.batch_size, "device": self.device,
                "n_threads": self._torch.get_num_threads()}

    def close(self) -> None:
        self._lm = None
