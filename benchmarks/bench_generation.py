"""Benchmark: answer generation per backend on this machine (packaged SmolLM2-135M-Instruct).

For each backend: install-free load time, output tokens per second of model time, the
generation stage's wall time against pure model time (stage = build prompts, generate, score
answers, compute uncertainty features; model time = what the engine reports, or the time
inside the model call), determinism (the same prompts twice; and batched vs one at a time),
and agreement of greedy texts across backends. Prompts are real QASPER yes/no questions
(``qasper_yesno``), each asked with retrieval (gold units first, then the document's other
units in order, capped at ``--evidence-chars``) and without retrieval.

Usage: python benchmarks/bench_generation.py [--questions 3] [--max-tokens 48]
       [--evidence-chars 3000] [--backends llama.cpp,openai-http,transformers,mlx]
       [--threads 1] [--out bench_generation.json]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path


def build_prompts(n: int, evidence_chars: int):
    from harness.data import load_dataset
    from harness.generation import no_retrieval_messages, rag_messages

    ds = load_dataset({"loader": "qasper_yesno", "max_questions": n})
    items = []
    for q in ds.questions:
        doc = ds.documents[q.doc_id]
        gold = [u for u in doc if u.unit_id in set(q.gold_unit_ids)]
        rest = [u for u in doc if u.unit_id not in set(q.gold_unit_ids)]
        boolean = q.answer_type == "yes_no"
        items.append((q, rag_messages(q.text, gold + rest, boolean=boolean, max_chars=evidence_chars),
                      no_retrieval_messages(q.text, boolean=boolean)))
    return items


def stage(gen, items):
    """The generation stage for a list of questions; returns (rows, wall seconds)."""
    from harness.generation import score_answer, uncertainty_features, utility_class

    t0 = time.perf_counter()
    rows = []
    for q, rag, nor in items:
        g_rag, g_nor = gen.generate_batch([rag, nor])
        s_rag = score_answer(g_rag.text, q.answers)
        s_nor = score_answer(g_nor.text, q.answers)
        rows.append({
            "qid": q.qid, "rag": g_rag, "nor": g_nor, "u": utility_class(s_rag.correct, s_nor.correct),
            "rag_correct": s_rag.correct, "nor_correct": s_nor.correct,
            "features": uncertainty_features(g_nor).to_dict(),
        })
    return rows, time.perf_counter() - t0


def summarise(name, gen, rows, wall, rows2, load_ms, batched=None):
    gens = [r[k] for r in rows for k in ("rag", "nor")]
    out_tok = sum(g.output_tokens for g in gens)
    model_s = sum(g.model_ms for g in gens) / 1000.0
    call_s = sum(g.ms for g in gens) / 1000.0
    def tps(kind):
        gs = [r[kind] for r in rows]
        return round(sum(g.output_tokens for g in gs) / (sum(g.model_ms for g in gs) / 1000.0), 1)

    same = all(a[k].text == b[k].text and a[k].logprobs == b[k].logprobs for a, b in zip(rows, rows2) for k in ("rag", "nor"))
    res = {
        "backend": name, "model": gen.model, "load_s": round(load_ms / 1000.0, 2),
        "prompt_tokens_mean": round(statistics.mean(g.prompt_tokens for g in gens), 1),
        "output_tokens": out_tok, "tokens_per_s": round(out_tok / model_s, 1),
        "tokens_per_s_no_retrieval": tps("nor"), "tokens_per_s_rag": tps("rag"),
        "stage_wall_s": round(wall, 2), "model_s": round(model_s, 2), "call_s": round(call_s, 2),
        "stage_over_model": round(wall / model_s, 3), "identical_rerun": same,
        "rag_correct": sum(r["rag_correct"] for r in rows), "no_retrieval_correct": sum(r["nor_correct"] for r in rows),
        "u": [r["u"] for r in rows],
        "texts": [[r["rag"].text, r["nor"].text] for r in rows],
    }
    if batched is not None:
        res["identical_batched"] = all(
            a[k].text == b[k].text and a[k].logprobs == b[k].logprobs for a, b in zip(rows, batched) for k in ("rag", "nor"))
        res["batched_same_texts"] = sum(a[k].text == b[k].text for a, b in zip(rows, batched) for k in ("rag", "nor"))
        res["batched_max_abs_logprob_diff"] = max(
            (abs(x - y) for a, b in zip(rows, batched) for k in ("rag", "nor")
             for x, y in zip(a[k].logprobs, b[k].logprobs)), default=0.0)
    return res


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--questions", type=int, default=3)
    ap.add_argument("--max-tokens", type=int, default=48)
    ap.add_argument("--evidence-chars", type=int, default=3000)
    ap.add_argument("--backends", default="llama.cpp,openai-http,transformers,mlx")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--out", default=None)
    args = ap.parse_args(argv)

    import torch

    from harness.generation import (GenerationConfig, LlamaCppGenerator, MLXGenerator,
                                    OpenAICompatibleGenerator, TransformersGenerator,
                                    gguf_to_hf_folder, packaged_model_path)

    torch.set_num_threads(args.threads)
    cfg = GenerationConfig(max_tokens=args.max_tokens)
    items = build_prompts(args.questions, args.evidence_chars)
    wanted = args.backends.split(",")
    results = []

    def run(name, gen, load_ms, batched_gen=None):
        rows, wall = stage(gen, items)
        rows2, _ = stage(gen, items)
        batched = stage(batched_gen, items)[0] if batched_gen is not None else None
        r = summarise(name, gen, rows, wall, rows2, load_ms, batched)
        results.append(r)
        print(json.dumps({k: v for k, v in r.items() if k != "texts"}), flush=True)

    if "llama.cpp" in wanted or "openai-http" in wanted:
        with LlamaCppGenerator(config=cfg, n_threads=args.threads) as g:
            if "llama.cpp" in wanted:
                with LlamaCppGenerator(config=cfg, n_threads=args.threads, n_parallel=2) as g2:
                    run("llama.cpp", g, g.load_ms, batched_gen=g2)
            if "openai-http" in wanted:
                h = OpenAICompatibleGenerator(g.url, config=cfg, extra_body={"cache_prompt": False})
                run("openai-http (llama.cpp server)", h, h.load_ms)
    if "transformers" in wanted:
        with TransformersGenerator(config=cfg) as t, TransformersGenerator(config=cfg, batch_size=2) as t2:
            run("transformers fp32 (GGUF dequantised)", t, t.load_ms, batched_gen=t2)
    if "mlx" in wanted:
        try:
            import mlx.core  # noqa: F401
        except ImportError:
            print("mlx: not importable, skipped", flush=True)
        else:
            with tempfile.TemporaryDirectory() as tmp:
                t0 = time.perf_counter()
                folder = gguf_to_hf_folder(packaged_model_path(), Path(tmp) / "smollm2")
                conv = time.perf_counter() - t0
                with MLXGenerator(folder, config=cfg) as m:
                    run("mlx-lm (cpu, fp32)", m, m.load_ms)
                    results[-1]["conversion_s"] = round(conv, 1)
                    print(json.dumps({"mlx_conversion_s": round(conv, 1)}), flush=True)

    base = next((r for r in results if r["backend"] == "llama.cpp"), None)
    ref = next((r for r in results if r["backend"].startswith("transformers")), None)
    for r in results:
        for other, label in ((base, "same_texts_as_llama.cpp"), (ref, "same_texts_as_transformers")):
            if other is not None and other is not r:
                r[label] = sum(a == b for x, y in zip(r["texts"], other["texts"]) for a, b in zip(x, y))
    print("\nbackend | load s | tok/s (all / no-retrieval / rag) | stage wall / model | rerun identical | batched identical | same texts as llama.cpp / transformers (of %d)" % (2 * len(items)))
    for r in results:
        print(f"{r['backend']} | {r['load_s']} | {r['tokens_per_s']} / {r['tokens_per_s_no_retrieval']} / {r['tokens_per_s_rag']} | {r['stage_over_model']} | "
              f"{r['identical_rerun']} | {r.get('identical_batched', '-')} | "
              f"{r.get('same_texts_as_llama.cpp', '-')} / {r.get('same_texts_as_transformers', '-')}")
    if args.out:
        Path(args.out).write_text(json.dumps(results, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
