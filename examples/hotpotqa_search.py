"""Search HotPotQA offline: the expert and a random agent on the real questions and on Gen-v0,
and a tool call dispatched while the agent keeps thinking.

Real questions: episode k is question k (``options={"task_index": k}``, seed k), so
``--episodes 588`` sweeps every question once. Gen-v0 episode k is seed k. Both agents see the
same episodes (paired). Scores are the official HotPotQA EM and F1 of the submitted answer;
an episode cut by the 7-step limit scores 0. The real questions need LMGYM_DATA (skipped, with
a note, when it is missing).

Smoke test: --episodes 2
"""

import argparse
import json
import time
from concurrent.futures import ThreadPoolExecutor

import gymnasium as gym

import lmgym  # noqa: F401  registers the lmgym/... ids
from lmgym.agents import ExpertAgent, RandomAgent, run_episode
from lmgym.data import DataNotFoundError

parser = argparse.ArgumentParser()
parser.add_argument("--episodes", type=int, default=20, help="episodes per env and agent")
parser.add_argument("--env-ids", nargs="+", default=["lmgym/HotPotQA-v0", "lmgym/HotPotQA-Gen-v0"])
parser.add_argument("--tool-latency", type=float, default=0.2, help="simulated seconds per tool call")
args = parser.parse_args()

# ---- 1. score the expert and a random agent -------------------------------------------
for env_id in args.env_ids:
    try:
        env = gym.make(env_id)
    except DataNotFoundError as error:
        print(f"{env_id}: skipped, no data ({str(error).splitlines()[0]})")
        continue
    finite = env.unwrapped.num_tasks is not None
    for agent in (ExpertAgent(), RandomAgent()):
        em = f1 = steps = 0.0
        for k in range(args.episodes):
            episode = run_episode(env, agent, seed=k, env_id=env_id,
                                  options={"task_index": k} if finite else None)
            scores = json.loads(episode.steps[-1].info_json)  # the last step's info: em, f1, ...
            em += scores["em"]
            f1 += scores["f1"]
            steps += episode.length
        n = args.episodes
        print(f"{env_id:<24} {agent.name:>6}: EM {em / n:.3f}  F1 {f1 / n:.3f}  mean steps {steps / n:.2f}")

# ---- 2. one expert transcript (a bridge question) ------------------------------------------
env = gym.make("lmgym/HotPotQA-Gen-v0")
observation, info = env.reset(seed=0)
print(f"\n{observation}")
done = False
while not done:
    print(f"Thought: {info['expert_reasoning']}\nAction: {info['expert_action']}")
    observation, reward, terminated, truncated, info = env.step(info["expert_action"])
    print(f"Observation: {observation}")
    done = terminated or truncated

# ---- 3. dispatch the tool call, keep decoding, then commit the step ----------------------
# A P-ReAct-style agent decodes its action first, sends it to the tool and writes its
# reasoning while the tool runs; the step then reuses the fetched result.
env = gym.make("lmgym/HotPotQA-Gen-v0", tool_latency_s=args.tool_latency)
observation, info = env.reset(seed=0)
action = info["expert_action"]
tools = env.unwrapped.tools
start = time.perf_counter()
with ThreadPoolExecutor(max_workers=1) as pool:
    pending = pool.submit(tools.dispatch, action)
    time.sleep(args.tool_latency)  # stands in for decoding the reasoning tokens meanwhile
    fetched = pending.result()
observation, *_ = env.step(action)
overlapped = time.perf_counter() - start
assert fetched == observation, "the tool returned something other than the step"

env.reset(seed=0)
start = time.perf_counter()
time.sleep(args.tool_latency)  # decode the reasoning first ...
env.step(action)  # ... then pay the search
sequential = time.perf_counter() - start
print(f"\ntool call overlapped with decoding: {overlapped:.2f} s; sequential: {sequential:.2f} s "
      f"(latency {args.tool_latency} s, decoding {args.tool_latency} s)")
