"""Which of the kvteam panels the training data of the kvteam models could have held.

The tiny backbones (`arith-ar`, `hotpotqa-distractor-ar`) and their DiffMAS adapters were trained
before splits existed, so their ``train_panels`` record no task ids (contamination unknown to
`lmgym.benchmarks.panels`). Their data is rebuilt here from the recorded commands
(examples/train_kvteam.py before the splits: the expert on seeds 1,000,000 + (i + 1) * 100,000 + k,
k < 8,000, of each data variant i (Arith: ``num_steps`` i + 1), and the LoRA's 2,000 problems on
seeds 1,900,000+, all with ``split="all"``, which keeps the old draws), and its task ids are
intersected with the test panel and with the old unsplit panels. The train-split data of the
Solver LoRAs trained since (an ``sft.jsonl``, if given) is checked too.

    python docs/results/kvteam/pre_split_overlap.py --task arith runs/kvteam/sft.jsonl
    python docs/results/kvteam/pre_split_overlap.py --task hotpotqa
"""

import argparse
import json

import gymnasium as gym

import lmgym  # noqa: F401  (registers the envs)
from lmgym.benchmarks.panels import panel_of
from lmgym.envs.splits import SPLITS, hash_split
from lmgym.rollouts import read_episodes

#: env, the backbone's data variants (env kwargs), the old unsplit panels' sizes
TASKS = {"arith": ("lmgym/Arith-v0", [{"num_steps": n} for n in (1, 2, 3, 4)], (50, 15)),
         "hotpotqa": ("lmgym/HotPotQA-Distractor-Gen-v0", [{}], (50, 30, 20, 10))}

parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
parser.add_argument("--task", choices=sorted(TASKS), default="arith")
parser.add_argument("sft", nargs="?", help="a train-split sft.jsonl of a later Solver LoRA")
args = parser.parse_args()
env_id, variants, old_sizes = TASKS[args.task]


def task_ids(seeds, **kwargs) -> set[str]:
    env = gym.make(env_id, **kwargs)
    return {env.unwrapped.task_id_for(seed) for seed in seeds}


firsts = [1_000_000 + (i + 1) * 100_000 for i in range(len(variants))]
backbone = set().union(*(task_ids(range(first, first + 8000), **v) for first, v in zip(firsts, variants)))
lora = task_ids(range(1_900_000, 1_902_000))
panels = {f"test split, seeds 0-{n - 1}": panel_of(env_id, {"split": "test"}, range(n)) for n in (50, 200)}
panels |= {f"unsplit (split all), seeds 0-{n - 1}": panel_of(env_id, {}, range(n)) for n in old_sizes}
later = {json.loads(e.steps[0].info_json)["task_id"] for e in read_episodes(args.sft)} if args.sft else set()
print(f"{env_id}, pre-split data: backbone {len(backbone)} distinct tasks, DiffMAS LoRAs {len(lora)}"
      + (f"; {args.sft}: {len(later)}" if args.sft else ""))
for name, panel in panels.items():
    tasks = set(panel.task_ids)
    splits = {s: sum(hash_split(t) == s for t in panel.task_ids) for s in SPLITS}
    print(f"{name} (panel {panel.hash[:12]}, splits {splits}): in the backbone's data {len(tasks & backbone)}, "
          f"in the DiffMAS LoRAs' {len(tasks & lora)}" + (f", in {args.sft} {len(tasks & later)}" if args.sft else ""))
