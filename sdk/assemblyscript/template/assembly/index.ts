// Template AssemblyScript env plugin: copy this folder, rename, edit.
// "GoLeft": the agent starts at cell 9 of a 10-cell grid and is rewarded for
// reaching cell 0 (action 0 moves left, 1 moves right).
//
// Build (from the repository root, see mk/plugins.mk):
//   sdk/assemblyscript/node_modules/.bin/asc sdk/assemblyscript/template/assembly/index.ts \
//     -o goleft.wasm --runtime incremental -O3 --noAssert \
//     --use abort=sdk/assemblyscript/assembly/index/abortTrap
// Check it with `trainyard plugin run goleft.wasm` (or `trainyard plugin push`).
// `trainyard plugin init NAME --lang assemblyscript` copies it into a project
// of its own, with the SDK and a pinned compiler.
export * from "../../assembly/exports";
import { Env, PCG32, registerEnv } from "../../assembly/index";

const SIZE: i32 = 10;

class GoLeft extends Env {
  pos: i32 = SIZE - 1;
  rng: PCG32 = new PCG32();

  seed(seed: u64): void {
    this.rng.seed(seed);
  }

  reset(obs: usize): void {
    this.pos = SIZE - 1;
    this.terminated = false;
    this.truncated = false;
    store<f32>(obs, <f32>this.pos);
  }

  step(action: usize, obs: usize): f32 {
    this.pos += load<f32>(action) == 0 ? -1 : 1;
    if (this.pos >= SIZE) this.pos = SIZE - 1;
    this.terminated = this.pos <= 0;
    if (this.pos < 0) this.pos = 0;
    store<f32>(obs, <f32>this.pos);
    return this.terminated ? 1.0 : 0.0;
  }
}

// Metadata JSON without abi_version/kind (the SDK adds them), then the
// observation and action dimensions, Discrete n (0 for Box actions), the
// episode step limit, and the factory.
registerEnv(
  '{"name":"goleft","version":"0.1.0","description":"template: walk left to cell 0",' +
  '"observation_space":{"kind":"box","shape":[1],"low":[0],"high":[9]},' +
  '"action_space":{"kind":"discrete","n":2},"max_episode_steps":50}',
  1, 1, 2, 50, (): Env => new GoLeft());
