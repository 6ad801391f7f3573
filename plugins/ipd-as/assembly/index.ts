// The Iterated Prisoner's Dilemma (sdk/go/envs/ipd) in AssemblyScript, on
// the SDK's multi-agent helper: two agents, 100 rounds, T=5 R=3 P=1 S=0;
// each agent observes the last two rounds, its own moves then the other's
// (one-hot cooperate/defect per round). It steps bit-identically to the Go
// game (internal/pluginhost: TestAssemblyScriptMultiAgentMatchesGo).
export * from "../../../sdk/assemblyscript/assembly/exports";
import { MultiAgentEnv, registerMultiAgentEnv } from "../../../sdk/assemblyscript/assembly/index";

const MEMORY: i32 = 2;
const OBS_DIM: i32 = 2 * MEMORY * 2;

function payoff(mine: i32, theirs: i32): f32 {
  if (mine == 0 && theirs == 0) return 3; // R
  if (mine == 0) return 0; // S
  if (theirs == 0) return 5; // T
  return 1; // P
}

class PrisonersDilemma extends MultiAgentEnv {
  // history[r*2 + player]: round r back (0: the last), 0 none, 1 + move.
  history: StaticArray<u8> = new StaticArray<u8>(MEMORY * 2);

  seed(seed: u64): void {} // the game has no randomness

  reset(obs: usize): void {
    for (let i = 0; i < MEMORY * 2; i++) unchecked(this.history[i] = 0);
    this.observe(obs);
  }

  step(actions: usize, obs: usize, rewards: usize, terminated: usize): void {
    const a0 = <i32>load<f32>(actions);
    const a1 = <i32>load<f32>(actions, 4);
    for (let r = MEMORY - 1; r > 0; r--) {
      unchecked(this.history[r * 2] = this.history[(r - 1) * 2]);
      unchecked(this.history[r * 2 + 1] = this.history[(r - 1) * 2 + 1]);
    }
    unchecked(this.history[0] = <u8>(a0 + 1));
    unchecked(this.history[1] = <u8>(a1 + 1));
    store<f32>(rewards, payoff(a0, a1));
    store<f32>(rewards, payoff(a1, a0), 4);
    store<u8>(terminated, 0);
    store<u8>(terminated, 0, 1);
    this.observe(obs);
  }

  observe(obs: usize): void {
    memory.fill(obs, 0, <usize>(2 * OBS_DIM) << 2);
    for (let p = 0; p < 2; p++) {
      const o = obs + (<usize>(p * OBS_DIM) << 2);
      for (let r = 0; r < MEMORY; r++) {
        for (let side = 0; side < 2; side++) {
          const who = side == 0 ? p : 1 - p;
          const m = <i32>unchecked(this.history[r * 2 + who]);
          if (m != 0) store<f32>(o + (<usize>(side * 2 * MEMORY + r * 2 + m - 1) << 2), 1);
        }
      }
    }
  }

  stateSize(): i32 { return MEMORY * 2; }
  save(buf: usize): void { memory.copy(buf, changetype<usize>(this.history), <usize>(MEMORY * 2)); }
  restore(buf: usize): void { memory.copy(changetype<usize>(this.history), buf, <usize>(MEMORY * 2)); }
}

registerMultiAgentEnv(
  '{"name":"ipd-as","version":"1.0.0",' +
  '"description":"Iterated Prisoner\'s Dilemma, two agents, 100 rounds (T=5 R=3 P=1 S=0), in AssemblyScript",' +
  '"observation_space":{"kind":"box","shape":[8],"low":[0,0,0,0,0,0,0,0],"high":[1,1,1,1,1,1,1,1]},' +
  '"action_space":{"kind":"discrete","n":2},"max_episode_steps":100,"agents":["agent_0","agent_1"]}',
  2, OBS_DIM, 1, 2, 100, (): MultiAgentEnv => new PrisonersDilemma());
