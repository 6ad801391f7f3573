// The ABI v1 export names; a plugin's entry file re-exports this module.
export {
  abiVersion as abi_version,
  metadata,
  lastError as last_error,
  alloc,
  free,
  init,
  reset,
  stepBatch as step_batch,
  rewardBatch as reward_batch,
  envSave as env_save,
  envRestore as env_restore,
} from "./index";
