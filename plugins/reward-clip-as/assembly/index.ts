// Reward clipping (as in DQN on Atari) in AssemblyScript: the shaped reward
// is the sign of the env's reward. Declares no spaces, so it composes with
// any env.
export * from "../../../sdk/assemblyscript/assembly/exports";
import { registerReward } from "../../../sdk/assemblyscript/assembly/index";

function clip(obs: usize, action: usize, nextObs: usize, obsDim: i32, actDim: i32, envReward: f32): f32 {
  if (envReward > 0) return 1;
  if (envReward < 0) return -1;
  return 0;
}

registerReward('{"name":"reward-clip-as","version":"1.0.0","description":"sign(env reward)"}', 0, 0, clip);
