"""Answer arms: answer from memory (``no_retrieval``) or from a retrieval arm's top k units
(``rag_keep``, ``rag_hybrid``, ``rag_bm25``), judged by the answer, as arm blocks.

Why blocks: generation is the most expensive stage. Each arm is its own block
(``harness.arm_blocks``), cached in verified chunks and resumed after an interruption; adding
RAG never regenerates the no-retrieval answers, and a change to the retrieval table changes
only the RAG arms' keys (they read ``<retrieval arm>.top10``).

Columns of an arm ``A`` (one row per question):

- outcomes: ``A.correct`` (1.0 when right: EM or F1 >= 0.8, yes/no accuracy for boolean
  questions, abstention right only on unanswerable ones; seed 003), ``A.em``, ``A.f1``,
  ``A.quality`` (docs/metrics.md §7's Q: F1, or yes/no accuracy), ``A.abstained``: derived from the cached
  answer text at every load (``derive``), never cached, so a change to the answer metrics
  rescores every cached answer;
- what was said: ``A.answer``, and for RAG ``A.units`` (the unit ids put into the prompt);
- costs: ``A.cost.prompt_tokens``, ``A.cost.output_tokens``, ``A.cost.tokens`` (their sum: the
  default cost axis of an answer pair, a count, so the same on every machine), ``A.cost.total_ms``
  (wall time of the call) and ``A.cost.model_ms`` (the engine's own time);
- ``no_retrieval`` also writes the uncertainty features of its answer (``feat.unc_*``, the
  feature set ``uncertainty``): mean and max token entropy over the top-k alternatives, 1 - the
  lowest top-1 probability, answer length in tokens.

Choices where docs/metrics.md is silent: ``k = 5`` units (seed 003), the evidence cap of 12,000
characters and seed 000's prompt rules (``harness.generation.prompts``); ``max_tokens`` 64 by
default (seed 000 allows 256: a short-answer dataset rarely needs more, and a 135M model that
rambles only costs time); greedy decoding. The key of a block holds the model's identity (the
SHA-256 of a local GGUF; a server's URL, without any credentials, and model name, since its
weights cannot be read), every generation setting and the engine's settings that can change
the text (``engine_identity``): for llama.cpp its version, thread count, context and batch
sizes. The thread count is pinned to 1 by default (``n_threads``): llama.cpp's greedy text
differed between 1 and 2 threads on 5 of 10 QASPER RAG prompts, so a default that followed the
machine's core count would build different answers on different machines; a block built with
more threads gets another key. What the generator reported (``Generator.describe()``) is
recorded in the cache's sidecars (``built_with``) and on every run as tags.
"""

from __future__ import annotations

import functools
import math
import time
from pathlib import Path
from typing import Any, NamedTuple

import pandas as pd

from harness import progress
from harness.arm_blocks import BASE, ArmBlock
from harness.errors import ConfigError, HarnessError
from harness.generation.answers import score_answer
from harness.generation.backends import load_generator
from harness.generation.generator import GenerationConfig, package_version, packaged_model_path
from harness.generation.http_client import redact_url
from harness.generation.llamacpp import LLAMACPP_N_CTX, llamacpp_settings
from harness.generation.options import YES_NO, choice_letters
from harness.generation.prompts import EvidenceUnit, no_retrieval_messages, rag_messages
from harness.generation.uncertainty import uncertainty_features
from harness.io import sha256_file
from harness.retrieval.feature_names import OPTION_UNCERTAINTY as OPTION_FEATURES, UNCERTAINTY as UNCERTAINTY_FEATURES
from harness.retrieval.precision import resolve_device

PROMPT_VERSION = 1  # bump when harness.generation.prompts changes what a prompt says
# generate: decode an answer (every question); options: yes/no questions are answered by scoring
# the options "Yes" / "No" after the prompt (harness.generation.options), multiple-choice ones by
# scoring the letters of their options, open ones decoded
ANSWER_MODES = ("generate", "options")
# the bounds of the answer arms' settings: (low, high, why); checked before any work
TOP_UNITS = 10  # a RAG arm reads its retrieval arm's ``<arm>.top10``: more units do not exist
MAX_TIMEOUT_S = 86_400.0  # one server request: a day
MAX_DEADLINE_S = 30 * 86_400.0  # a whole build against a server: 30 days
ANSWER_BOUNDS: dict[str, tuple[int, int, str]] = {
    "max_tokens": (1, 4096, " (half of the 8192-token context: the prompt needs the rest)"),
    "top_k": (1, 20, " (alternatives per token; 20 is the OpenAI API's top_logprobs limit)"),
    "k": (1, TOP_UNITS, f" (a RAG arm reads its retrieval arm's top {TOP_UNITS})"),
    "seed": (0, 2**32 - 1, ""),
    "n_threads": (1, 512, " (ggml's GGML_MAX_N_THREADS)"),
    "retries": (0, 100, ""),
}


@functools.lru_cache(maxsize=8)
def _file_digest(path: str) -> str:
    return sha256_file(path)


def model_identity(spec: str) -> dict:
    """What identifies the model behind a generator spec (``load_generator``'s syntax); a
    server's URL without its credentials (they never enter a key)."""
    s = str(spec)
    if s.startswith(("http://", "https://")):
        return {"server": redact_url(s)}
    name, _, arg = s.partition(":")
    if name in ("default", "llamacpp", "llama.cpp") or s.lower().endswith(".gguf"):
        path = Path(arg) if arg else (Path(s) if s.lower().endswith(".gguf") else packaged_model_path())
        return {"backend": "llama.cpp", "gguf": path.name, "sha256": _file_digest(str(path))}
    path = Path(arg) if arg else None
    if path is not None and path.is_file():
        return {"backend": name, "file": path.name, "sha256": _file_digest(str(path))}
    if path is not None and path.is_dir():
        files = sorted(p for p in path.rglob("*") if p.is_file())
        return {"backend": name, "folder": path.name,
                "files": {str(p.relative_to(path)): _file_digest(str(p)) for p in files}}
    return {"backend": name, "packaged": _file_digest(str(packaged_model_path()))}


def engine_identity(spec: str, n_threads: int) -> dict:
    """The engine settings behind a generator spec that can change the generated text and are
    not part of the model: for llama.cpp ``llamacpp_settings`` (version, threads, context and
    batch sizes); for transformers the torch/transformers versions, dtype and torch's thread
    count; for mlx its versions. A server's settings are its operator's: not knowable here."""
    s = str(spec)
    if s.startswith(("http://", "https://")):
        return {"engine": "server"}
    name = s.partition(":")[0]
    if name in ("default", "llamacpp", "llama.cpp") or s.lower().endswith(".gguf"):
        return llamacpp_settings(n_threads=n_threads, n_ctx=LLAMACPP_N_CTX)
    if name == "transformers":
        return {"engine": "transformers", "transformers_version": package_version("transformers"),
                "torch_version": package_version("torch"), "weights_dtype": "float32", "n_threads": int(n_threads)}
    return {"engine": name, "mlx_version": package_version("mlx"), "mlx_lm_version": package_version("mlx-lm")}


def check_engine(keyed: dict, described: dict, arm: str) -> None:
    """Refuse to cache text from a generator whose settings differ from the keyed ones: the
    key must say how the text was made."""
    differ = {k: (v, described[k]) for k, v in keyed.items() if k in described and described[k] != v}
    if differ:
        raise HarnessError(f"arm {arm!r}: the generator runs with {differ} (keyed, running): "
                           "its text would be cached under a key that does not describe it")


class AnswerSettingError(ConfigError, ValueError):
    """An answer arm's setting out of range or of the wrong type. Its key is the setting's name;
    ``harness.arm_blocks.make_block`` prefixes the block's config key (``arms.blocks[1].max_tokens``).
    A ValueError too: a constructor's refusal of its parameters, wherever the arm is made."""


def _integer(key: str, value: Any, low: int, high: int, why: str = "") -> None:
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
        raise AnswerSettingError(key, f"must be an integer in [{low}, {high}]{why}, got {value!r}")


def _seconds(key: str, value: Any, high: float) -> None:
    ok = (isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)
          and 0 < value <= high)
    if not ok:
        raise AnswerSettingError(key, f"must be a number of seconds in (0, {high:g}], got {value!r}")


def check_answer_settings(*, generator: Any, max_tokens: Any, top_k: Any, seed: Any, k: Any, model: Any, device: Any,
                          n_threads: Any, timeout_s: Any, deadline_s: Any, retries: Any, mode: Any) -> None:
    """Every range and type of an answer arm's settings, before anything is built or logged
    (bounds: ``ANSWER_BOUNDS``, with why); raises ``AnswerSettingError`` naming the setting."""
    for key, value in (("generator", generator), ("device", device)):
        if not isinstance(value, str) or not value.strip():
            raise AnswerSettingError(key, f"must be a non-empty string, got {value!r}")
    if model is not None and (not isinstance(model, str) or not model.strip()):
        raise AnswerSettingError("model", f"must be a model name (a non-empty string) or null, got {model!r}")
    for key, value in (("max_tokens", max_tokens), ("top_k", top_k), ("k", k), ("seed", seed), ("n_threads", n_threads),
                       ("retries", retries)):
        low, high, why = ANSWER_BOUNDS[key]
        _integer(key, value, low, high, why)
    _seconds("timeout_s", timeout_s, MAX_TIMEOUT_S)
    if deadline_s is not None:
        _seconds("deadline_s", deadline_s, MAX_DEADLINE_S)
    if not isinstance(mode, str) or mode not in ANSWER_MODES:
        raise AnswerSettingError("mode", f"must be one of {', '.join(ANSWER_MODES)}, got {mode!r}")
    check_generator_spec(generator)


GENERATOR_SPECS = ("default", "llamacpp[:PATH.gguf]", "PATH.gguf", "transformers[:PATH]", "mlx[:FOLDER]",
                   "http(s)://HOST:PORT")


def _path_kind(path: Path) -> str:
    """"file", "folder", "missing", or what else the path is (checked with ``stat``: opening or
    hashing a FIFO blocks)."""
    import stat

    try:
        mode = path.expanduser().stat().st_mode
    except OSError:
        return "missing"
    if stat.S_ISREG(mode):
        return "file"
    if stat.S_ISDIR(mode):
        return "folder"
    return "a FIFO (named pipe)" if stat.S_ISFIFO(mode) else "a device, socket or other special file"


def check_generator_spec(generator: str) -> None:
    """``generator`` is a spec ``load_generator`` understands, naming a model that is there: a
    ``.gguf`` that is a regular file, a ``transformers``/``mlx`` path that is a file or folder.
    Checked before the base table is built or the model is hashed, so a typo costs no minutes."""
    s = str(generator)
    if s.startswith(("http://", "https://")):
        return
    name, _, arg = s.partition(":")
    if name in ("default", "llamacpp", "llama.cpp", "transformers", "mlx") and not arg:
        return
    if name in ("default", "llamacpp", "llama.cpp") or (name not in ("transformers", "mlx") and s.lower().endswith(".gguf")):
        path = Path(arg if name in ("default", "llamacpp", "llama.cpp") else s)
        kind = _path_kind(path)
        if kind != "file" or path.suffix.lower() != ".gguf":
            what = "not found" if kind == "missing" else f"is {kind}" if kind != "file" else "is not a .gguf file"
            raise AnswerSettingError("generator", f"llama.cpp model {str(path)!r} {what}; expected a local .gguf file")
        return
    if name in ("transformers", "mlx"):
        kind = _path_kind(Path(arg))
        if kind not in ("file", "folder") or (name == "mlx" and kind != "folder"):
            want = "a model folder" if name == "mlx" else "a .gguf file or a model folder"
            what = "not found" if kind == "missing" else f"is {kind}"
            raise AnswerSettingError("generator", f"{name} model {arg!r} {what}; expected {want}")
        return
    raise AnswerSettingError("generator", f"unknown generator spec {s!r}; use {', '.join(GENERATOR_SPECS)}")


#: settings that only one kind of generator reads, with their defaults: a value other than the
#: default given to the other kind would be logged as a parameter yet change nothing, so it is refused
SERVER_ONLY = {"timeout_s": 120.0, "deadline_s": None, "retries": 3}
IN_PROCESS_ONLY = {"n_threads": 1}


def _refuse_settings_that_do_nothing(server: bool, generator: Any, **given: Any) -> None:
    unused = SERVER_ONLY if not server else IN_PROCESS_ONLY
    for key, default in unused.items():
        if given[key] != default:
            where = "a server generator (http://...)" if not server else "an in-process generator"
            raise AnswerSettingError(key, f"applies to {where} only; generator {str(generator)!r} would ignore "
                                          f"{given[key]!r} (leave it at {default!r})")


class _Answer(NamedTuple):
    """One question's answer as an arm records it (``wall_ms``: the call's wall time)."""

    text: str
    prompt_tokens: int
    output_tokens: int
    model_ms: float | None
    wall_ms: float
    uncertainty: dict[str, float]


def _option_answer(gen: Any, q: Any, prompt: Any) -> _Answer:
    """A closed question answered by scoring its options after the prompt: "Yes" / "No", or
    the letters of a multiple-choice question's options; the answer is the option's text."""
    t0 = time.perf_counter()
    letters = choice_letters(len(q.choices)) if q.choices else YES_NO
    scored = gen.score_options(prompt.as_list(), letters)
    wall_ms = (time.perf_counter() - t0) * 1000.0
    # the answer is the option's text (a letter names the option shown under it)
    text = q.choices[letters.index(scored.best)] if q.choices else scored.best
    return _Answer(text, scored.prompt_tokens, 0, scored.model_ms, wall_ms, option_uncertainty(scored))


class AnswerArm(ArmBlock):
    """What the answer arms share: the generator, the settings, scoring, costs."""

    requires = (BASE,)
    version = "1"
    chunk_size = 16
    retrieval: str | None = None  # the retrieval arm whose top k units a RAG arm reads

    def __init__(self, generator: str = "default", max_tokens: int = 64, top_k: int = 5, seed: int = 0,
                 k: int = 5, model: str | None = None, device: str = "cpu", n_threads: int = 1,
                 timeout_s: float = 120.0, deadline_s: float | None = None, retries: int = 3,
                 mode: str = "generate"):
        check_answer_settings(generator=generator, max_tokens=max_tokens, top_k=top_k, seed=seed, k=k, model=model,
                              device=device, n_threads=n_threads, timeout_s=timeout_s, deadline_s=deadline_s,
                              retries=retries, mode=mode)
        server = str(generator).startswith(("http://", "https://"))
        _refuse_settings_that_do_nothing(server, generator, n_threads=n_threads, timeout_s=timeout_s,
                                         deadline_s=deadline_s, retries=retries)
        if str(device) != "cpu" and not server and not str(generator).startswith("transformers"):
            raise AnswerSettingError("device", f"{device!r}: the in-process {str(generator).partition(':')[0]} "
                                     "backend runs on the CPU here (the prebuilt llama.cpp wheel is CPU-only); on a "
                                     "GPU use generator=transformers:PATH or a server (http://...)")
        self.generator = str(generator)
        self.max_tokens = max_tokens
        self.top_k = top_k
        self.seed = seed
        self.k = k
        self.model = model
        self.device = "server" if server else str(device)  # a server places its model itself
        if mode == "options" and engine_identity(str(generator), n_threads)["engine"] != "xllamacpp":
            raise AnswerSettingError("mode", "'options' reads the whole next-token distribution, which only the "
                                     "llama.cpp backend gives here (generator: default or a .gguf), not "
                                     f"{str(generator).partition(':')[0]!r}")
        self.mode = mode
        self.n_threads = n_threads
        self.timeout_s = timeout_s  # a server's bounds: how long to wait, not what is answered,
        self.deadline_s = deadline_s  # so not in the key (``identity``)
        self.retries = retries
        self._deadline_at: float | None = None  # deadline_s counts from the build's first request
        self._built_with: dict | None = None

    def _base_identity(self) -> dict:
        base = ArmBlock.identity(self)
        base["params"]["generator"] = redact_url(self.generator)  # credentials never enter a key
        for waiting in ("timeout_s", "deadline_s", "retries"):
            base["params"].pop(waiting, None)
        return {**base, "model": {**model_identity(self.generator), "name": self.model},
                "engine": engine_identity(self.generator, self.n_threads), "prompt_version": PROMPT_VERSION}

    def built_with(self) -> dict | None:
        """What the generator of the last ``compute`` reported (``describe()``), for the cache's
        sidecars and the run's tags."""
        return self._built_with

    # ---- per question ----------------------------------------------------------------------
    def prompt(self, question, row, units: dict, boolean: bool):
        """The ``Prompt`` for one question (its table row and the dataset's units at hand)."""
        raise NotImplementedError

    def _server_kwargs(self) -> dict:
        """A server generator's model name and bounds; ``deadline_s`` counts from the build's
        first request, so a later chunk gets only what is left of it."""
        kwargs: dict = {}
        if self.model:
            kwargs["model"] = self.model
        kwargs.update(timeout_s=self.timeout_s, retries=self.retries)
        if self.deadline_s is not None:
            if self._deadline_at is None:
                self._deadline_at = time.monotonic() + float(self.deadline_s)
            left = self._deadline_at - time.monotonic()
            if left <= 0:
                raise HarnessError(f"arm {self.arms[0]!r}: deadline_s={self.deadline_s:g} passed; the chunks "
                                   "answered so far are kept (run again to resume)")
            kwargs["deadline_s"] = left
        return kwargs

    def _generator_kwargs(self, engine: dict) -> dict:
        """``load_generator``'s keyword arguments for this arm: a server's bounds, a transformers
        device, llama.cpp's thread count (``engine``: the keyed engine settings)."""
        kwargs: dict = self._server_kwargs() if self.generator.startswith(("http://", "https://")) else {}
        if self.generator.startswith("transformers") and self.device != "cpu":
            kwargs["device"] = resolve_device(self.device, "device")
        if engine["engine"] == "xllamacpp":
            kwargs["n_threads"] = self.n_threads
        return kwargs

    def _answer(self, gen: Any, q: Any, prompt: Any, boolean: bool) -> _Answer:
        """One question's answer: its options scored (mode ``options``, closed questions) or
        decoded."""
        if self.mode == "options" and (boolean or q.choices):
            return _option_answer(gen, q, prompt)
        t0 = time.perf_counter()
        g = gen.generate(prompt.as_list())
        wall_ms = (time.perf_counter() - t0) * 1000.0
        u = uncertainty_features(g)
        unc = {"unc_mean_entropy": float(u.mean_entropy), "unc_max_entropy": float(u.max_entropy),
               "unc_min_confidence": float(u.min_confidence), "unc_answer_tokens": float(u.answer_tokens)}
        if self.mode == "options":
            unc.update({name: float("nan") for name in OPTION_FEATURES})
        return _Answer(g.text, g.prompt_tokens, g.output_tokens, g.model_ms, wall_ms, unc)

    def _record(self, q: Any, prompt: Any, answer: _Answer) -> dict:
        """The arm's row for one answered question: text, costs, uncertainty, units shown."""
        arm = self.arms[0]
        prefix = "feat." if self.retrieval is None else f"feat.{arm}_"
        prompt_n, output_n, model_ms = answer.prompt_tokens, answer.output_tokens, answer.model_ms
        rec = {
            "qid": q.qid,
            f"{arm}.answer": answer.text,
            f"{arm}.cost.prompt_tokens": float(prompt_n),
            f"{arm}.cost.output_tokens": float(output_n),
            f"{arm}.cost.tokens": float(prompt_n + output_n),
            f"{arm}.cost.total_ms": answer.wall_ms,
            f"{arm}.cost.model_ms": float(model_ms) if model_ms is not None else float("nan"),
        }
        rec.update({prefix + name: value for name, value in answer.uncertainty.items()})
        if self.retrieval is not None:
            rec[f"{arm}.units"] = list(prompt.unit_ids)
        return rec

    def compute(self, rows: pd.DataFrame, dataset: Any) -> pd.DataFrame:
        if dataset is None or not getattr(dataset, "questions", None):
            raise HarnessError(f"arm {self.arms[0]!r} generates answers from the dataset's questions: the synthetic "
                               "table has no text (use a real dataset, e.g. dataset=qasper_yesno)")
        questions = {q.qid: q for q in dataset.questions}
        units = {u.unit_id: u for doc in dataset.documents.values() for u in doc}
        cfg = GenerationConfig(max_tokens=self.max_tokens, top_k=self.top_k, seed=self.seed)
        engine = engine_identity(self.generator, self.n_threads)
        kwargs = self._generator_kwargs(engine)
        arm = self.arms[0]
        out: list[dict] = []
        with torch_threads(self.n_threads if engine["engine"] == "transformers" else None), \
                load_generator(self.generator, config=cfg, **kwargs) as gen:
            described = gen.describe()
            check_engine(engine, described, arm)
            self._built_with = {"generator": described, "engine": engine}
            for _, row in rows.iterrows():
                q = questions.get(str(row["qid"]))
                if q is None:
                    raise HarnessError(f"arm {arm!r}: question {row['qid']!r} of the table is not in dataset "
                                       f"{dataset.name!r}")
                boolean = q.answer_type == "yes_no"
                prompt = self.prompt(q, row, units, boolean)
                out.append(self._record(q, prompt, self._answer(gen, q, prompt, boolean)))
                progress.current("questions").tick(1)  # the block build's time left, inside a chunk too
        return pd.DataFrame(out)

    def derive(self, frame: pd.DataFrame, dataset: Any) -> pd.DataFrame | None:
        """The answer's scores, from its cached text and the dataset's references: a change to
        the answer metrics rescores every cached answer instead of leaving stale numbers."""
        arm = self.arms[0]
        questions = {q.qid: q for q in dataset.questions}
        rows = []
        for qid, text in zip(frame["qid"], frame[f"{arm}.answer"]):
            q = questions[str(qid)]
            s = score_answer(str(text), list(q.answers), boolean=(q.answer_type == "yes_no") or None,
                             choices=q.choices or None)
            rows.append({f"{arm}.correct": float(s.correct), f"{arm}.em": float(s.em), f"{arm}.f1": float(s.f1),
                         f"{arm}.quality": float(s.quality), f"{arm}.abstained": float(s.abstained)})
        return pd.DataFrame(rows, index=frame.index)

    def identity(self) -> dict:
        ident = self._base_identity()
        if self.device == "cpu":  # the default keeps the key it had before devices existed
            ident["params"].pop("device", None)
        return ident


def option_uncertainty(scored) -> dict[str, float]:
    """The uncertainty features of an option-scored answer: exact values of the option
    distribution (``harness.generation.options``) under the names of the decoded answer's
    features, so every router reads them alike: mean and max entropy = the option entropy (one
    decision), 1 - the best option's probability, one answer token; plus the margin between the
    two best options' log-likelihoods and the options' share of the next-token mass."""
    return {"unc_mean_entropy": scored.entropy, "unc_max_entropy": scored.entropy,
            "unc_min_confidence": 1.0 - max(scored.probs), "unc_answer_tokens": 1.0,
            "unc_option_margin": scored.margin, "unc_option_mass": scored.mass}


class torch_threads:
    """torch's intra-op thread count set for the block's build and restored after (None: no-op)."""

    def __init__(self, n: int | None):
        self.n, self.old = n, None

    def __enter__(self):
        if self.n is not None:
            import torch

            self.old = torch.get_num_threads()
            torch.set_num_threads(self.n)
        return self

    def __exit__(self, *exc):
        if self.old is not None:
            import torch

            torch.set_num_threads(self.old)


class NoRetrievalArm(AnswerArm):
    """Answer from the model's memory: no evidence in the prompt."""

    name, arms = "no_retrieval", ("no_retrieval",)
    feature_sets = {"uncertainty": UNCERTAINTY_FEATURES, "option_uncertainty": OPTION_FEATURES}  # the second: mode options

    def prompt(self, question, row, units, boolean):
        return no_retrieval_messages(question.text, boolean=boolean, choices=question.choices)


def _post_generation_set(arm: str) -> dict[str, tuple[str, ...]]:
    """A RAG arm's own answer uncertainty (``feat.<arm>_unc_*``): known only AFTER the RAG answer
    is generated, so a router reading it is a post-generation predictor (seed 002's Uncertainty
    predictor is the drop in max entropy from the memory answer to the RAG answer), never a
    cost-saving one."""
    return {f"uncertainty_{arm}": tuple(f"{arm}_{name}" for name in UNCERTAINTY_FEATURES)}


class _RagArm(AnswerArm):
    """Answer from the top ``k`` units of ``retrieval``'s ranking (``<retrieval>.top10``).
    Version 2: also records the RAG answer's uncertainty (``feat.<arm>_unc_*``)."""

    requires = (BASE,)
    version = "2"

    def prompt(self, question, row, units, boolean):
        ranked = [str(u) for u in list(row[f"{self.retrieval}.top10"])[: self.k]]
        evidence = [EvidenceUnit(uid, units[uid].text, units[uid].kind) for uid in ranked if uid in units]
        return rag_messages(question.text, evidence, boolean=boolean, choices=question.choices)


class RagKeepArm(_RagArm):
    name, arms, retrieval = "rag_keep", ("rag_keep",), "keep"
    feature_sets = _post_generation_set("rag_keep")


class RagHybridArm(_RagArm):
    name, arms, retrieval = "rag_hybrid", ("rag_hybrid",), "hybrid"
    feature_sets = _post_generation_set("rag_hybrid")


class RagBM25Arm(_RagArm):
    name, arms, retrieval = "rag_bm25", ("rag_bm25",), "bm25"
    feature_sets = _post_generation_set("rag_bm25")
