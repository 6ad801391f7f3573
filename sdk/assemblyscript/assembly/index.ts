// Trainyard plugin SDK for AssemblyScript: ABI v1 (docs/plugin-abi.md).
//
// A plugin's entry file re-exports the ABI and registers one environment:
//
//   export * from "<sdk>/assembly/exports";
//   import { Env, registerEnv } from "<sdk>/assembly/index";
//   class MyEnv extends Env { ... }
//   registerEnv(META_JSON, (): Env => new MyEnv());
//
// Build with --runtime incremental (buffers from alloc are freed with free) and
// --use abort=<sdk>/assembly/index/abortTrap so the module imports nothing.

export const ABI_VERSION: i32 = 1;
export const STATUS_OK: i32 = 0;
export const STATUS_BAD_INPUT: i32 = 1;
export const STATUS_FAULT: i32 = 2;

/** One environment instance. step() sets terminated/truncated. */
export abstract class Env {
  terminated: bool = false;
  truncated: bool = false;
  /** Reseed the instance's random source. */
  abstract seed(seed: u64): void;
  /** Start an episode from the instance's random source; write obsDim f32 at obs. */
  abstract reset(obs: usize): void;
  /** Apply the actDim f32 action at action, write the next observation, return the reward. */
  abstract step(action: usize, obs: usize): f32;
  /**
   * Bytes save() writes. An env whose whole state (physics, counters and
   * random stream) can be saved overrides stateSize, save and restore, so a
   * checkpointed run resumes its episodes bit for bit; the default -1 says
   * it cannot, and a restored run starts fresh episodes.
   */
  stateSize(): i32 { return -1; }
  /** Write exactly stateSize() bytes of the instance's whole state at buf. */
  save(buf: usize): void {}
  /** Put back a state save() wrote (stateSize() bytes at buf). */
  restore(buf: usize): void {}
}

/**
 * One instance of a multi-agent game (docs/plugin-abi.md, "Multi-agent
 * envs"): every buffer holds all agents' values in agent order. The SDK
 * batches instances into slots (instance-major, one per agent), keeps each
 * finished agent out until the instance's last one finishes, then resets
 * the instance.
 */
export abstract class MultiAgentEnv {
  /** Reseed the instance's random source. */
  abstract seed(seed: u64): void;
  /** Start an episode: write agents × obsDim f32 at obs. */
  abstract reset(obs: usize): void;
  /**
   * Apply every agent's action (agents × actDim f32 at actions; a finished
   * agent's is to be ignored), then write every agent's next observation at
   * obs, its reward (f32) at rewards and whether its episode ended this
   * step (u8 0/1) at terminated. A finished agent is asked again until all
   * are done; its reward then counts for nothing.
   */
  abstract step(actions: usize, obs: usize, rewards: usize, terminated: usize): void;
  /** As Env.stateSize: bytes save() writes, -1 when it cannot. */
  stateSize(): i32 { return -1; }
  save(buf: usize): void {}
  restore(buf: usize): void {}
}

// Registration (one plugin per module).
let metaPtr: usize = 0;
let metaLen: i32 = 0;
let factory: (() => Env) | null = null;
let obsDim: i32 = 0;
let actDim: i32 = 0;
let actN: i32 = 0; // > 0: discrete action space with n actions
let maxSteps: i32 = 0;

/**
 * Registers an environment. meta is the metadata JSON without abi_version
 * and kind (the SDK adds them); the dimensions must match its spaces.
 * discreteN > 0 declares a Discrete(n) action space (actions are validated).
 */
export function registerEnv(meta: string, obsDimension: i32, actDimension: i32, discreteN: i32,
  maxEpisodeSteps: i32, make: () => Env): void {
  registerSpaces(meta, obsDimension, actDimension, discreteN, maxEpisodeSteps);
  factory = make;
}

function registerSpaces(meta: string, obsDimension: i32, actDimension: i32, discreteN: i32, maxEpisodeSteps: i32): void {
  const full = '{"abi_version":1,"kind":"env",' + meta.slice(1);
  const buf = String.UTF8.encode(full);
  metaPtr = changetype<usize>(buf);
  metaLen = buf.byteLength;
  obsDim = obsDimension;
  actDim = actDimension;
  actN = discreteN;
  maxSteps = maxEpisodeSteps;
}

let maFactory: (() => MultiAgentEnv) | null = null;
let nAgents: i32 = 0;

/**
 * Registers a multi-agent environment: meta names its agents ("agents":
 * [...], agents of them) and the spaces every agent shares; as registerEnv
 * otherwise. init's n is then instances × agents.
 */
export function registerMultiAgentEnv(meta: string, agents: i32, obsDimension: i32, actDimension: i32, discreteN: i32,
  maxEpisodeSteps: i32, make: () => MultiAgentEnv): void {
  registerSpaces(meta, obsDimension, actDimension, discreteN, maxEpisodeSteps);
  nAgents = agents;
  maFactory = make;
}

/** A reward-shaping function over one transition (pointers to f32 vectors). */
export type RewardFn = (obs: usize, action: usize, nextObs: usize, obsDim: i32, actDim: i32, envReward: f32) => f32;

let rewardFn: RewardFn | null = null;

/**
 * Registers a reward plugin. obsDimension/actDimension > 0 restrict it to
 * envs of those dimensions; 0 composes with any env (omit the spaces from
 * meta then).
 */
export function registerReward(meta: string, obsDimension: i32, actDimension: i32, fn: RewardFn): void {
  const full = '{"abi_version":1,"kind":"reward",' + meta.slice(1);
  const buf = String.UTF8.encode(full);
  metaPtr = changetype<usize>(buf);
  metaLen = buf.byteLength;
  obsDim = obsDimension;
  actDim = actDimension;
  rewardFn = fn;
}

// Error reporting.
let errPtr: usize = 0;
let errLen: i32 = 0;

export function fail(status: i32, msg: string): i32 {
  const buf = String.UTF8.encode(msg);
  errPtr = changetype<usize>(buf);
  errLen = buf.byteLength;
  return status;
}

/** abort handler: any assertion or allocation failure traps. */
export function abortTrap(message: string | null, fileName: string | null, line: u32, column: u32): void {
  unreachable();
}

// Instances.
let envs = new Array<Env>(0);
let steps = new Array<i32>(0);
let nEnvs: i32 = 0;

export function abiVersion(): i32 { return ABI_VERSION; }
export function metadata(): u64 { return (<u64>metaPtr << 32) | <u64>metaLen; }
export function lastError(): u64 { return (<u64>errPtr << 32) | <u64>errLen; }

export function alloc(size: u32): usize {
  return heap.alloc(<usize>((size + 7) & ~7));
}

export function free(ptr: usize): void {
  heap.free(ptr);
}

export function init(n: i32, seed: u64): i32 {
  if (n <= 0) return fail(STATUS_BAD_INPUT, "init: n must be > 0, got " + n.toString());
  if (rewardFn != null) return STATUS_OK;
  if (maFactory != null) return maInit(n);
  if (factory == null) return fail(STATUS_FAULT, "init: no env registered");
  // Instances are kept across inits (a pooled instance is re-inited).
  while (envs.length < n) {
    envs.push(factory!());
    steps.push(0);
  }
  nEnvs = n;
  return STATUS_OK;
}

export function reset(seed: u64, obs: usize): i32 {
  if (nEnvs == 0) return fail(STATUS_BAD_INPUT, "reset before init");
  if (obs == 0) return fail(STATUS_BAD_INPUT, "reset: null obs");
  if (maFactory != null) return maReset(seed, obs);
  const ob = <usize>obsDim << 2;
  for (let i = 0; i < nEnvs; i++) {
    const e = unchecked(envs[i]);
    e.seed(seed + <u64>i);
    e.reset(obs + <usize>i * ob);
    unchecked(steps[i] = 0);
  }
  return STATUS_OK;
}

// @ts-ignore: decorator
@inline function validDiscrete(a: f32, n: f32): bool {
  return a >= 0 && a < n && a == Mathf.floor(a);
}

// checkActions validates a discrete action batch, 8 per loop iteration:
// each loop iteration costs a termination check under wazero's sandbox.
function checkActions(actions: usize, count: i32): bool {
  if (actN <= 0) {
    for (let i = 0; i < count; i++) {
      const a = load<f32>(actions + (<usize>i << 2));
      if (a != a) return false;
    }
    return true;
  }
  const n = <f32>actN;
  let ok = true;
  let i = 0;
  for (; i + 8 <= count; i += 8) {
    const p = actions + (<usize>i << 2);
    ok = ok && validDiscrete(load<f32>(p), n) && validDiscrete(load<f32>(p, 4), n)
      && validDiscrete(load<f32>(p, 8), n) && validDiscrete(load<f32>(p, 12), n)
      && validDiscrete(load<f32>(p, 16), n) && validDiscrete(load<f32>(p, 20), n)
      && validDiscrete(load<f32>(p, 24), n) && validDiscrete(load<f32>(p, 28), n);
  }
  for (; i < count; i++) {
    ok = ok && validDiscrete(load<f32>(actions + (<usize>i << 2)), n);
  }
  return ok;
}

// @ts-ignore: decorator
@inline function stepOne(i: i32, actions: usize, obs: usize, rewards: usize, term: usize, trunc: usize, finalObs: usize): void {
  const ob = <usize>obsDim << 2;
  const e = unchecked(envs[i]);
  const o = obs + <usize>i * ob;
  const r = e.step(actions + <usize>i * (<usize>actDim << 2), o);
  store<f32>(rewards + (<usize>i << 2), r);
  const te = e.terminated;
  let tr = e.truncated;
  const s = unchecked(steps[i]) + 1;
  if (maxSteps > 0 && s >= maxSteps && !te) tr = true;
  store<u8>(term + <usize>i, <u8>te);
  store<u8>(trunc + <usize>i, <u8>tr);
  if (te || tr) {
    memory.copy(finalObs + <usize>i * ob, o, ob);
    e.reset(o);
    unchecked(steps[i] = 0);
  } else {
    unchecked(steps[i] = s);
  }
}

export function stepBatch(n: i32, actions: usize, obs: usize, rewards: usize, term: usize, trunc: usize, finalObs: usize): i32 {
  if (nEnvs == 0) return fail(STATUS_BAD_INPUT, "step_batch before init");
  if (n != nEnvs) return fail(STATUS_BAD_INPUT, "step_batch: n = " + n.toString() + ", init had " + nEnvs.toString());
  if (actions == 0 || obs == 0 || rewards == 0 || term == 0 || trunc == 0 || finalObs == 0) {
    return fail(STATUS_BAD_INPUT, "step_batch: null buffer");
  }
  if (maFactory != null) return maStep(actions, obs, rewards, term, trunc, finalObs);
  if (!checkActions(actions, n * actDim)) return fail(STATUS_BAD_INPUT, "step_batch: action outside the action space");
  // Unrolled by 8 for the same reason as checkActions.
  let i = 0;
  for (; i + 8 <= n; i += 8) {
    stepOne(i, actions, obs, rewards, term, trunc, finalObs);
    stepOne(i + 1, actions, obs, rewards, term, trunc, finalObs);
    stepOne(i + 2, actions, obs, rewards, term, trunc, finalObs);
    stepOne(i + 3, actions, obs, rewards, term, trunc, finalObs);
    stepOne(i + 4, actions, obs, rewards, term, trunc, finalObs);
    stepOne(i + 5, actions, obs, rewards, term, trunc, finalObs);
    stepOne(i + 6, actions, obs, rewards, term, trunc, finalObs);
    stepOne(i + 7, actions, obs, rewards, term, trunc, finalObs);
  }
  for (; i < n; i++) stepOne(i, actions, obs, rewards, term, trunc, finalObs);
  return STATUS_OK;
}

// Env state (env_save / env_restore): per instance, little-endian,
//   u32 steps since its reset, u8 terminated, u8 truncated,
//   u32 length, then that many bytes of Env.save.
const ENV_STATE_HEAD: i32 = 10;

function stateBytes(): i32 {
  let total = 0;
  for (let i = 0; i < nEnvs; i++) {
    const k = unchecked(envs[i]).stateSize();
    if (k < 0) return -1;
    total += ENV_STATE_HEAD + k;
  }
  return total;
}

/**
 * env_save: writes every instance's state to buf (capacity bytes) and its
 * length to outLen. Too small a buffer: STATUS_BAD_INPUT with outLen set
 * (the host retries with room); an env that cannot save its state:
 * STATUS_BAD_INPUT with outLen 0.
 */
export function envSave(buf: usize, capacity: u32, outLen: usize): i32 {
  if (nEnvs == 0) return fail(STATUS_BAD_INPUT, "env_save before init");
  if (buf == 0 || outLen == 0) return fail(STATUS_BAD_INPUT, "env_save: null buffer");
  const total = maFactory != null ? maStateBytes() : stateBytes();
  if (total < 0) {
    store<u32>(outLen, 0);
    return fail(STATUS_BAD_INPUT, "env_save: this env cannot save its state");
  }
  store<u32>(outLen, <u32>total);
  if (<u32>total > capacity) {
    return fail(STATUS_BAD_INPUT, "env_save: state is " + total.toString() + " bytes, buffer holds " + capacity.toString());
  }
  if (maFactory != null) {
    maSave(buf);
    return STATUS_OK;
  }
  let p = buf;
  for (let i = 0; i < nEnvs; i++) {
    const e = unchecked(envs[i]);
    const k = e.stateSize();
    store<u32>(p, <u32>unchecked(steps[i]));
    store<u8>(p, <u8>e.terminated, 4);
    store<u8>(p, <u8>e.truncated, 5);
    store<u32>(p, <u32>k, 6);
    e.save(p + ENV_STATE_HEAD);
    p += <usize>(ENV_STATE_HEAD + k);
  }
  return STATUS_OK;
}

/** env_restore: puts back n bytes from env_save of as many instances. */
export function envRestore(buf: usize, n: u32): i32 {
  if (nEnvs == 0) return fail(STATUS_BAD_INPUT, "env_restore before init");
  if (buf == 0) return fail(STATUS_BAD_INPUT, "env_restore: null buffer");
  const total = maFactory != null ? maStateBytes() : stateBytes();
  if (total < 0) return fail(STATUS_BAD_INPUT, "env_restore: this env cannot restore a state");
  if (<u32>total != n) {
    return fail(STATUS_BAD_INPUT, "env_restore: " + n.toString() + " bytes, " + nEnvs.toString() + " slots take " + total.toString());
  }
  if (maFactory != null) return maRestore(buf);
  // Check every length before any env changes.
  let p = buf;
  for (let i = 0; i < nEnvs; i++) {
    const k = unchecked(envs[i]).stateSize();
    if (load<u32>(p, 6) != <u32>k) {
      return fail(STATUS_BAD_INPUT, "env_restore: env " + i.toString() + " has " + load<u32>(p, 6).toString() + " bytes, want " + k.toString());
    }
    p += <usize>(ENV_STATE_HEAD + k);
  }
  p = buf;
  for (let i = 0; i < nEnvs; i++) {
    const e = unchecked(envs[i]);
    unchecked(steps[i] = <i32>load<u32>(p));
    e.terminated = load<u8>(p, 4) != 0;
    e.truncated = load<u8>(p, 5) != 0;
    e.restore(p + ENV_STATE_HEAD);
    p += <usize>(ENV_STATE_HEAD + e.stateSize());
  }
  return STATUS_OK;
}

// Multi-agent batches: instance i's agent a is slot i·agents + a.
let games = new Array<MultiAgentEnv>(0);
let gameSteps = new Array<i32>(0);
let slotDone = new Array<bool>(0);
let nGames: i32 = 0;
let maObs: usize = 0; // one instance's agents × obsDim f32
let maRew: usize = 0; // agents f32
let maTerm: usize = 0; // agents u8

function maInit(n: i32): i32 {
  if (n % nAgents != 0) {
    return fail(STATUS_BAD_INPUT, "init: n = " + n.toString() + " slots is not a whole number of instances of " + nAgents.toString() + " agents");
  }
  while (games.length < n / nAgents) {
    games.push(maFactory!());
    gameSteps.push(0);
  }
  while (slotDone.length < n) slotDone.push(false);
  nGames = n / nAgents;
  nEnvs = n;
  if (maObs == 0) {
    maObs = heap.alloc(<usize>(nAgents * obsDim) << 2);
    maRew = heap.alloc(<usize>nAgents << 2);
    maTerm = heap.alloc(<usize>nAgents);
  }
  return STATUS_OK;
}

function maReset(seed: u64, obs: usize): i32 {
  const w = <usize>(nAgents * obsDim) << 2;
  for (let i = 0; i < nGames; i++) {
    const g = unchecked(games[i]);
    g.seed(seed + <u64>i);
    g.reset(obs + <usize>i * w);
    unchecked(gameSteps[i] = 0);
  }
  for (let k = 0; k < nEnvs; k++) unchecked(slotDone[k] = false);
  return STATUS_OK;
}

function maStep(actions: usize, obs: usize, rewards: usize, term: usize, trunc: usize, finalObs: usize): i32 {
  const ab = <usize>actDim << 2;
  if (actN > 0) {
    const n = <f32>actN;
    for (let k = 0; k < nEnvs; k++) {
      if (unchecked(slotDone[k])) continue; // a finished agent's action is ignored
      for (let d = 0; d < actDim; d++) {
        if (!validDiscrete(load<f32>(actions + <usize>k * ab + (<usize>d << 2)), n)) {
          return fail(STATUS_BAD_INPUT, "step_batch: slot " + k.toString() + ": action outside the action space");
        }
      }
    }
  }
  const ob = <usize>obsDim << 2;
  const w = <usize>nAgents * ob;
  for (let i = 0; i < nGames; i++) {
    const g = unchecked(games[i]);
    const lo = i * nAgents;
    g.step(actions + <usize>lo * ab, maObs, maRew, maTerm);
    const s = unchecked(gameSteps[i]) + 1;
    unchecked(gameSteps[i] = s);
    const limit = maxSteps > 0 && s >= maxSteps;
    memory.copy(obs + <usize>i * w, maObs, w);
    let all = true;
    for (let a = 0; a < nAgents; a++) {
      const k = lo + a;
      const ku = <usize>k;
      store<f32>(rewards + (ku << 2), 0);
      store<u8>(term + ku, 0);
      store<u8>(trunc + ku, 0);
      if (!unchecked(slotDone[k])) {
        const te = load<u8>(maTerm + <usize>a) != 0;
        const tr = limit && !te;
        store<f32>(rewards + (ku << 2), load<f32>(maRew + (<usize>a << 2)));
        store<u8>(term + ku, <u8>te);
        store<u8>(trunc + ku, <u8>tr);
        if (te || tr) {
          unchecked(slotDone[k] = true);
          memory.copy(finalObs + ku * ob, maObs + <usize>a * ob, ob);
        }
      }
      all = all && unchecked(slotDone[k]);
    }
    if (all) {
      g.reset(obs + <usize>i * w);
      unchecked(gameSteps[i] = 0);
      for (let a = 0; a < nAgents; a++) unchecked(slotDone[lo + a] = false);
    }
  }
  return STATUS_OK;
}

// Multi-agent env state: per instance, u32 steps since its reset, one u8
// per agent (finished, waiting for the others), u32 length, then that many
// bytes of MultiAgentEnv.save.
function maStateBytes(): i32 {
  let total = 0;
  for (let i = 0; i < nGames; i++) {
    const k = unchecked(games[i]).stateSize();
    if (k < 0) return -1;
    total += 8 + nAgents + k;
  }
  return total;
}

// maSave writes maStateBytes() bytes at buf (envSave checked the room).
function maSave(buf: usize): void {
  let p = buf;
  for (let i = 0; i < nGames; i++) {
    const g = unchecked(games[i]);
    const k = g.stateSize();
    store<u32>(p, <u32>unchecked(gameSteps[i]));
    for (let a = 0; a < nAgents; a++) store<u8>(p + 4 + <usize>a, <u8>unchecked(slotDone[i * nAgents + a]));
    store<u32>(p + 4 + <usize>nAgents, <u32>k);
    g.save(p + 8 + <usize>nAgents);
    p += <usize>(8 + nAgents + k);
  }
}

// maRestore puts back maStateBytes() bytes from maSave (envRestore checked
// the total).
function maRestore(buf: usize): i32 {
  let p = buf;
  for (let i = 0; i < nGames; i++) {
    const k = unchecked(games[i]).stateSize();
    if (load<u32>(p + 4 + <usize>nAgents) != <u32>k) {
      return fail(STATUS_BAD_INPUT, "env_restore: instance " + i.toString() + " has " + load<u32>(p + 4 + <usize>nAgents).toString() + " bytes, want " + k.toString());
    }
    p += <usize>(8 + nAgents + k);
  }
  p = buf;
  for (let i = 0; i < nGames; i++) {
    const g = unchecked(games[i]);
    unchecked(gameSteps[i] = <i32>load<u32>(p));
    for (let a = 0; a < nAgents; a++) unchecked(slotDone[i * nAgents + a] = load<u8>(p + 4 + <usize>a) != 0);
    g.restore(p + 8 + <usize>nAgents);
    p += <usize>(8 + nAgents + g.stateSize());
  }
  return STATUS_OK;
}

/** PCG32 (O'Neill), a small seedable generator for guest environments. */
export class PCG32 {
  state: u64 = 0;
  inc: u64 = 0;
  seed(seed: u64, stream: u64 = 54): void {
    this.state = 0;
    this.inc = (stream << 1) | 1;
    this.next();
    this.state += seed;
    this.next();
  }
  next(): u32 {
    const old = this.state;
    this.state = old * 6364136223846793005 + this.inc;
    const xorshifted = <u32>(((old >> 18) ^ old) >> 27);
    const rot = <u32>(old >> 59);
    return (xorshifted >> rot) | (xorshifted << ((-rot) & 31));
  }
  /** Uniform in [lo, hi) with 53-bit resolution. */
  /** Writes the generator's 16 bytes of state at buf. */
  save(buf: usize): void {
    store<u64>(buf, this.state);
    store<u64>(buf, this.inc, 8);
  }
  /** Reads 16 bytes written by save. */
  restore(buf: usize): void {
    this.state = load<u64>(buf);
    this.inc = load<u64>(buf, 8);
  }
  uniform(lo: f64, hi: f64): f64 {
    const bits = (<u64>this.next() << 21) ^ <u64>this.next();
    const u = <f64>(bits & ((<u64>1 << 53) - 1)) / <f64>(<u64>1 << 53);
    return lo + (hi - lo) * u;
  }
}

export function rewardBatch(n: i32, od: i32, ad: i32, obs: usize, actions: usize, nextObs: usize, envRewards: usize, out: usize): i32 {
  if (rewardFn == null) return fail(STATUS_BAD_INPUT, "reward_batch: not a reward plugin");
  if (n < 0 || od <= 0 || ad <= 0) return fail(STATUS_BAD_INPUT, "reward_batch: bad sizes");
  if ((obsDim > 0 && od != obsDim) || (actDim > 0 && ad != actDim)) {
    return fail(STATUS_BAD_INPUT, "reward_batch: dimensions " + od.toString() + "/" + ad.toString() + " do not match the plugin's");
  }
  if (obs == 0 || actions == 0 || nextObs == 0 || envRewards == 0 || out == 0) return fail(STATUS_BAD_INPUT, "reward_batch: null buffer");
  const f = rewardFn!;
  const ob = <usize>od << 2, ab = <usize>ad << 2;
  for (let i = 0; i < n; i++) {
    const o = <usize>i;
    store<f32>(out + (o << 2), f(obs + o * ob, actions + o * ab, nextObs + o * ob, od, ad, load<f32>(envRewards + (o << 2))));
  }
  return STATUS_OK;
}
