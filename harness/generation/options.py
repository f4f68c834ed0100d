"""Option scoring for closed answers (yes/no, multiple choice): the model's log-likelihood of each option right
after the prompt, instead of decoding an answer.

Why: a small model asked a yes/no question often starts its answer with something else
("Python is ...") and is scored wrong although its distribution prefers one of the options;
and the entropy of a decoded answer's tokens (over the top 5, renormalised) is a weak stand-in
for the model's uncertainty about the answer. Scoring the options as lm-evaluation-harness's
``loglikelihood`` requests do gives the answer the model prefers among the allowed ones, and
the exact entropy and margin of the option distribution.

How: one evaluation of the chat prompt (with the assistant header) gives the full next-token
distribution (llama.cpp returns every vocabulary entry when asked for as many alternatives);
each option that is one vocabulary piece ("Yes", "No" in SmolLM2's vocabulary) reads its
log-probability there, so all options share the prompt's one evaluation. An option that is not
exactly one piece is refused (scoring it would need the model's tokenizer and one evaluation
per piece). No text is decoded.

Multiple choice: the options are shown in the prompt as "A. ...", "B. ..." and the scored
options are the letters (``choice_letters``), single pieces in the vocabulary, as
lm-evaluation-harness scores MMLU's lettered form; the answer is the option of the best letter.

For options o_1..o_n with log-likelihoods l_i: p_i = exp(l_i) / sum_j exp(l_j) (the option
distribution), answer = the option of the highest l_i (the first listed on an exact tie),
``entropy`` = -sum_i p_i ln p_i (nats, exact: at most ln n), ``margin`` = l_best - l_second
(nats), ``mass`` = sum_i exp(l_i) (how much of the next-token distribution the options hold).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Mapping, Sequence

from harness.generation.chat_response import checked_logprob
from harness.generation.errors import GenerationError

YES_NO = ("Yes", "No")
LETTERS = "ABCDEFGHIJ"


def choice_letters(n: int) -> tuple[str, ...]:
    """The letters that label ``n`` options in a multiple-choice prompt (A, B, ...)."""
    if not 2 <= n <= len(LETTERS):
        raise ValueError(f"a multiple-choice question needs 2 to {len(LETTERS)} options, got {n}")
    return tuple(LETTERS[:n])


@dataclass(frozen=True)
class OptionScores:
    options: tuple[str, ...]
    logprobs: tuple[float, ...]  # log-likelihood of each option after the prompt
    prompt_tokens: int
    model_ms: float | None = None

    @property
    def probs(self) -> tuple[float, ...]:
        m = max(self.logprobs)
        w = [math.exp(lp - m) for lp in self.logprobs]
        z = sum(w)
        return tuple(x / z for x in w)

    @property
    def best(self) -> str:
        return self.options[max(range(len(self.options)), key=lambda i: (self.logprobs[i], -i))]

    @property
    def entropy(self) -> float:
        return -sum(p * math.log(p) for p in self.probs if p > 0)

    @property
    def margin(self) -> float:
        top = sorted(self.logprobs, reverse=True)
        return top[0] - top[1] if len(top) > 1 else math.inf

    @property
    def mass(self) -> float:
        return sum(math.exp(lp) for lp in self.logprobs)


def check_options(options: Sequence[str]) -> tuple[str, ...]:
    opts = tuple(str(o) for o in options)
    if len(opts) < 2 or len(set(opts)) != len(opts) or any(not o for o in opts):
        raise ValueError(f"options must be two or more distinct non-empty strings, got {list(options)!r}")
    return opts


def option_logprobs(distribution: Sequence[Mapping], options: Sequence[str], source: str) -> tuple[float, ...]:
    """Each option's log-probability in one step's full next-token ``distribution`` (entries
    ``{"token", "logprob"}``, every vocabulary piece), checked: an option must be exactly one
    piece, every logprob finite and <= 0."""
    found: dict[str, list[float]] = {o: [] for o in options}
    for i, entry in enumerate(distribution):
        tok = entry.get("token") if isinstance(entry, Mapping) else None
        if tok in found:
            found[tok].append(checked_logprob(entry.get("logprob"), source, f"top_logprobs[{i}].logprob"))
    out = []
    for o, lps in found.items():
        if len(lps) != 1:
            how = "is not one piece of" if not lps else f"is {len(lps)} pieces of"
            raise GenerationError(f"{source}: option {o!r} {how} the model's vocabulary: option scoring reads "
                                  "single-piece options only (e.g. 'Yes' / 'No')")
        out.append(lps[0])
    return tuple(out)
