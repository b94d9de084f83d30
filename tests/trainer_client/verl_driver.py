"""verl's own ``RewardLoopManager`` on a local Ray cluster, scoring one batch with Plaudit's
documented reward file; run by ``test_verl_ray.py`` under the verl virtualenv
(``scripts/install_verl.sh``), since verl's pins do not fit the project's.

Reads a JSON job on stdin (``manager``, ``tokenizer``, ``reward_file``, ``env``, ``rows`` with
``response`` and ``extra_info``) and prints one JSON line: the batch's ``rm_scores`` at each
response's last token and the ``reward_extra_info`` columns verl assembled, or the error verl
raised (``{"error": "KeyError: 'score'"}``).
"""

from __future__ import annotations

import json
import sys
from typing import Any


def _batch(tokenizer: Any, rows: list[dict[str, Any]], prompt_len: int, response_len: int) -> Any:
    """A rollout batch as verl's agent loops hand it to the reward loop: left-padded prompts,
    right-padded responses, one attention mask over both."""
    import numpy as np
    import torch
    from verl import DataProto

    pad = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else 0
    prompts, responses, masks = [], [], []
    for row in rows:
        prompt = tokenizer.encode(row.get("prompt_text", "Hi"), add_special_tokens=False)
        prompt = prompt[-prompt_len:]
        response = tokenizer.encode(row["response"], add_special_tokens=False)[:response_len]
        prompts.append([pad] * (prompt_len - len(prompt)) + prompt)
        responses.append(response + [pad] * (response_len - len(response)))
        masks.append(
            [0] * (prompt_len - len(prompt))
            + [1] * len(prompt)
            + [1] * len(response)
            + [0] * (response_len - len(response))
        )
    prompt_t, response_t = torch.tensor(prompts), torch.tensor(responses)
    return DataProto.from_dict(
        tensors={
            "prompts": prompt_t,
            "responses": response_t,
            "input_ids": torch.cat([prompt_t, response_t], dim=1),
            "attention_mask": torch.tensor(masks),
        },
        non_tensors={
            "data_source": np.array(["plaudit"] * len(rows), dtype=object),
            "reward_model": np.array([{"ground_truth": None} for _ in rows], dtype=object),
            "extra_info": np.array([dict(row["extra_info"]) for row in rows], dtype=object),
        },
    )


def _config(job: dict[str, Any]) -> Any:
    """The part of verl's ppo_trainer config the reward loop reads."""
    from omegaconf import OmegaConf

    return OmegaConf.create(
        {
            "actor_rollout_ref": {"model": {"path": job["tokenizer"], "tokenizer_path": None}},
            "reward": {
                "num_workers": 1,
                "reward_manager": {"name": job["manager"], "source": "register"},
                "custom_reward_function": {"path": job["reward_file"], "name": "compute_score"},
                "reward_model": {"enable": False, "enable_resource_pool": False},
                "max_concurrent": 2,
                "timeout": 600.0,
            },
        }
    )


def main() -> None:
    job = json.load(sys.stdin)
    import ray
    from transformers import AutoTokenizer
    from verl.experimental.reward_loop.reward_loop import RewardLoopManager

    # The environment reaches the reward workers as docs/trainers.md says: Ray's runtime env.
    ray.init(
        num_cpus=2,
        include_dashboard=False,
        log_to_driver=True,
        runtime_env={"env_vars": job["env"]},
    )
    try:
        tokenizer = AutoTokenizer.from_pretrained(job["tokenizer"])
        data = _batch(tokenizer, job["rows"], prompt_len=16, response_len=32)
        try:
            out = RewardLoopManager(_config(job)).compute_rm_score(data)
        except Exception as exc:  # verl's own failure is what the test looks at
            print(json.dumps({"error": f"{type(exc).__name__}: {exc}"}))
            return
        scores = out.batch["rm_scores"]
        lengths = data.batch["attention_mask"][:, 16:].sum(dim=1)
        print(
            json.dumps(
                {
                    "scores": [float(scores[i, int(n) - 1]) for i, n in enumerate(lengths)],
                    "extra": {
                        key: [
                            float(v) if not isinstance(v, str) else v
                            for v in out.non_tensor_batch[key]
                        ]
                        for key in out.meta_info["reward_extra_keys"]
                    },
                }
            )
        )
    finally:
        ray.shutdown()


if __name__ == "__main__":
    main()
