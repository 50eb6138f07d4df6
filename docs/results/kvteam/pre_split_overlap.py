"""Which of the kvteam Arith panels the training data of the kvteam models could have held.

`arith-ar` and the DiffMAS adapters were trained before splits existed, so their ``train_panels``
record no task ids (contamination unknown to `lmgym.benchmarks.panels`). Their data is rebuilt
here from the recorded commands (examples/train_kvteam.py before the splits: the expert on seeds
1,000,000 + (i + 1) * 100,000 + k, k < 8,000, of ``num_steps`` i + 1, and the LoRA's 2,000
problems on seeds 1,900,000+, all with ``split="all"``, which keeps the old draws) and its task ids
intersected with the test panel and with the old unsplit panel (seeds 0-49, ``split="all"``); the
train-split data of the Solver LoRAs trained since (``sft.jsonl``, if given) is checked too.

    python docs/results/kvteam/pre_split_overlap.py [runs/kvteam/sft.jsonl]
"""

import json
import sys

import gymnasium as gym

import lmgym  # noqa: F401  (registers the envs)
from lmgym.benchmarks.panels import panel_of
from lmgym.envs.splits import SPLITS, hash_split
from lmgym.rollouts import read_episodes

ENV = "lmgym/Arith-v0"


def task_ids(seeds, **kwargs) -> set[str]:
    env = gym.make(ENV, **kwargs)
    return {env.unwrapped.task_id_for(seed) for seed in seeds}


backbone = set().union(*(task_ids(range(first, first + 8000), num_steps=i + 1)
                         for i, first in enumerate(1_000_000 + (i + 1) * 100_000 for i in range(4))))
lora = task_ids(range(1_900_000, 1_902_000))
panels = {"test split, seeds 0-49": panel_of(ENV, {"split": "test"}, range(50)),
          "test split, seeds 0-199": panel_of(ENV, {"split": "test"}, range(200)),
          "unsplit (split all), seeds 0-49": panel_of(ENV, {}, range(50))}
later = ({json.loads(e.steps[0].info_json)["task_id"] for e in read_episodes(sys.argv[1])} if len(sys.argv) > 1
         else set())
print(f"pre-split data: backbone {len(backbone)} distinct tasks, DiffMAS LoRAs {len(lora)}"
      + (f"; {sys.argv[1]}: {len(later)}" if later else ""))
for name, panel in panels.items():
    tasks = set(panel.task_ids)
    splits = {s: sum(hash_split(t) == s for t in panel.task_ids) for s in SPLITS}
    print(f"{name} (panel {panel.hash[:12]}, splits {splits}): in the backbone's data {len(tasks & backbone)}, "
          f"in the DiffMAS LoRAs' {len(tasks & lora)}" + (f", in {sys.argv[1]} {len(tasks & later)}" if later else ""))
