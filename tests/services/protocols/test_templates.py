"""Chat-templated prompt text back into the conversation, for the templates trainers use.

The strings are what each family's tokenizer template renders (``apply_chat_template`` with
``add_generation_prompt=True``), as OpenRLHF decodes them with ``skip_special_tokens=False``
and slime sends them with ``--apply-chat-template``.
"""

from __future__ import annotations

import pytest

from plaudit_wire.schemas import Message
from services.protocols.scoring import locate_response
from services.protocols.templates import unwrap_prompt

QUESTION = "What is the capital of France?"
SMOLLM_SYSTEM = "You are a helpful AI assistant named SmolLM, trained by Hugging Face"

TEMPLATED = {
    "chatml": (
        f"<|im_start|>system\n{SMOLLM_SYSTEM}<|im_end|>\n"
        f"<|im_start|>user\n{QUESTION}<|im_end|>\n<|im_start|>assistant\n"
    ),
    "llama3": (
        "<|begin_of_text|><|start_header_id|>system<|end_header_id|>\n\n"
        "Cutting Knowledge Date: December 2023\nToday Date: 26 Jul 2024\n\n<|eot_id|>"
        f"<|start_header_id|>user<|end_header_id|>\n\n{QUESTION}<|eot_id|>"
        "<|start_header_id|>assistant<|end_header_id|>\n\n"
    ),
    "gemma": (f"<bos><start_of_turn>user\n{QUESTION}<end_of_turn>\n<start_of_turn>model\n"),
    "mistral": f"<s>[INST] {QUESTION} [/INST]",
    "mistral_v7": (f"<s>[SYSTEM_PROMPT]You are Mistral.[/SYSTEM_PROMPT][INST]{QUESTION}[/INST]"),
    "llama2": f"<s>[INST] <<SYS>>\nYou are helpful.\n<</SYS>>\n\n{QUESTION} [/INST]",
    "phi3": f"<|system|>\nYou are Phi.<|end|>\n<|user|>\n{QUESTION}<|end|>\n<|assistant|>\n",
    "zephyr": f"<|system|>\nYou are Zephyr.</s>\n<|user|>\n{QUESTION}</s>\n<|assistant|>\n",
    "phi4": (
        "<|im_start|>system<|im_sep|>You are Phi-4.<|im_end|>"
        f"<|im_start|>user<|im_sep|>{QUESTION}<|im_end|><|im_start|>assistant<|im_sep|>"
    ),
}
FAMILY = {"mistral_v7": "mistral", "llama2": "mistral", "zephyr": "phi", "phi3": "phi"}


@pytest.mark.parametrize("name", sorted(TEMPLATED))
def test_one_user_turn_becomes_the_plain_question(name: str) -> None:
    unwrapped = unwrap_prompt(TEMPLATED[name])
    assert unwrapped.prompt == QUESTION, "the judge sees what it sees for the plain prompt"
    assert unwrapped.template == FAMILY.get(name, name.replace("phi4", "chatml"))


def test_the_system_prompt_is_kept_when_asked() -> None:
    unwrapped = unwrap_prompt(TEMPLATED["chatml"], keep_system=True)
    assert unwrapped.prompt == [
        Message(role="system", content=SMOLLM_SYSTEM),
        Message(role="user", content=QUESTION),
    ]


def test_a_multi_turn_conversation_keeps_its_turns() -> None:
    text = (
        "<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n"
        "<|im_start|>assistant\nHello! How can I help?<|im_end|>\n"
        "<|im_start|>user\nName a colour.<|im_end|>\n<|im_start|>assistant\n"
    )
    assert unwrap_prompt(text).prompt == [
        Message(role="user", content="Hi"),
        Message(role="assistant", content="Hello! How can I help?"),
        Message(role="user", content="Name a colour."),
    ]
    mistral = "<s>[INST] Hi [/INST] Hello! How can I help?</s>[INST] Name a colour. [/INST]"
    assert unwrap_prompt(mistral).prompt == [
        Message(role="user", content="Hi"),
        Message(role="assistant", content="Hello! How can I help?"),
        Message(role="user", content="Name a colour."),
    ]


@pytest.mark.parametrize(
    "text",
    [
        QUESTION,
        "Explain what <|im_start|> means in ChatML.",
        "Some preamble <|im_start|>user\nHi<|im_end|>",  # text outside the turns
        "<|im_start|>system\nOnly a system prompt.<|im_end|>\n",  # no user turn
        "Mistral wraps turns as [INST] x [/INST] y",  # text precedes the first turn
    ],
)
def test_text_that_is_not_a_whole_template_is_left_alone(text: str) -> None:
    unwrapped = unwrap_prompt(text)
    assert (unwrapped.prompt, unwrapped.template) == (text, None)


def test_a_prompt_cut_from_the_left_keeps_its_fragment_as_the_first_turn() -> None:
    cut = "the capital of France?<|im_end|>\n<|im_start|>assistant\n"
    assert unwrap_prompt(cut).template is None, "not a whole template"
    assert unwrap_prompt(cut, truncated=True).prompt == "...the capital of France?"
    long = "ery long context.<|im_end|>\n<|im_start|>user\nAnd the question?<|im_end|>\n"
    assert unwrap_prompt(long + "<|im_start|>assistant\n", truncated=True).prompt == [
        Message(role="user", content="...ery long context."),
        Message(role="user", content="And the question?"),
    ]


def test_a_query_whose_prompt_was_cut_from_the_left_is_located() -> None:
    prompt = TEMPLATED["chatml"]
    seen = prompt[len(prompt) // 2 :]  # what the policy was given after truncation
    located = locate_response(seen + "Paris.<|im_end|>", prompt)
    assert located is not None
    assert (located.response, located.prompt_seen, located.truncated) == ("Paris.", seen, True)
    whole = locate_response(prompt + "Paris.<|im_end|>", prompt)
    assert whole is not None and not whole.truncated and whole.response == "Paris."
    assert locate_response("Something else entirely.", prompt) is None
