"""Chat models end to end on realistic local checkpoints (tests/chat_models.py: a Qwen2 with its
own pad token, a Llama without one whose prompts hold EOS tokens): prompts through the chat
template with one BOS, and masks that are the same in ``generate`` and the training forward pass.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import torch

from advest.training import prompts
from advest.training.policy import forward_logprobs, load_policy
from advest.training.sampling import response_mask
from tests.chat_models import Kind, build
from tests.core.training.test_training import TRAINER_WARNINGS

# Lightning and torch warn about their own internals during a fit (as in test_training.py)
pytestmark = TRAINER_WARNINGS
KINDS: list[Kind] = ["qwen2", "llama"]
SYSTEM = "please answer with a number only"
CHATS: list[Any] = [
    ({"role": "user", "content": "what is 2+3?"},),
    "what is the sum of 41 and 7?",  # a text prompt is one user message
]


@pytest.fixture(scope="module", params=KINDS)
def chat_model(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Path:
    kind: Kind = request.param
    return build(kind, tmp_path_factory.mktemp(kind))


def test_prompts_go_through_the_chat_template_with_exactly_one_bos(chat_model: Path) -> None:
    _, tok = load_policy(str(chat_model))
    ids = prompts.token_ids(tok, CHATS[0], system_prompt=SYSTEM)
    text = tok.decode(ids)
    want = tok.apply_chat_template(
        [{"role": "system", "content": SYSTEM}, *CHATS[0]],
        add_generation_prompt=True,
        tokenize=False,
    )
    assert text == want
    assert ids.count(tok.bos_token_id) == (tok.bos_token_id is not None)  # Llama: one, Qwen2: none
    plain = prompts.token_ids(tok, "2+3=", chat_template=False)
    assert plain.count(tok.bos_token_id) == (tok.bos_token_id is not None)
    with pytest.raises(ValueError, match="chat template"):
        prompts.token_ids(tok, CHATS[0], chat_template=False)


def test_the_pad_token_is_its_own_when_the_tokenizer_has_one(chat_model: Path) -> None:
    _, tok = load_policy(str(chat_model))
    if chat_model.name.startswith("qwen2"):
        assert tok.pad_token == "<|endoftext|>" != tok.eos_token
    else:  # no pad and no unknown token: EOS pads, and the masks below must still agree
        assert tok.pad_token_id == tok.eos_token_id


@torch.no_grad()
def test_rollout_logprobs_equal_a_fresh_forward_pass_on_the_same_sequences(
    chat_model: Path,
) -> None:
    model, tok = load_policy(str(chat_model))
    model.eval()
    ids, attn = prompts.encode(tok, CHATS, system_prompt=SYSTEM)
    G, T = 3, 8
    torch.manual_seed(0)
    out = model.generate(
        input_ids=ids,
        attention_mask=attn,
        do_sample=True,
        top_k=0,
        max_new_tokens=T,
        num_return_sequences=G,
        pad_token_id=tok.pad_token_id,
        eos_token_id=tok.eos_token_id,
        output_logits=True,
        return_dict_in_generate=True,
    )
    P = ids.shape[1]
    seqs = out.sequences
    resp = seqs[:, P:]
    sampled = torch.stack(out.logits, 1).float().log_softmax(-1)  # what generate sampled from
    gen_logp = sampled.gather(-1, resp.unsqueeze(-1)).squeeze(-1)  # [S, T]
    mask = response_mask(resp, tok.eos_token_id)
    logp = forward_logprobs(model, seqs, attn.repeat_interleave(G, 0), mask, 1.0).logp
    assert (ids == tok.eos_token_id).any()  # EOS closes each message inside the prompts
    gap = (logp - gen_logp)[mask].abs().max()
    assert gap < 1e-4, f"rollout and forward log-probs differ by {gap} nats"
