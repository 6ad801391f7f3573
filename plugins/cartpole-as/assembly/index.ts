// CartPole-v1 in AssemblyScript with Gymnasium's dynamics, termination and
// 500-step limit. Resets draw from PCG32 (not bit-identical to the Go
// reference, whose resets use Go's math/rand/v2).
export * from "../../../sdk/assemblyscript/assembly/exports";
import { Env, PCG32, registerEnv } from "../../../sdk/assemblyscript/assembly/index";

const GRAVITY: f64 = 9.8;
const MASSCART: f64 = 1.0;
const MASSPOLE: f64 = 0.1;
const TOTAL_MASS: f64 = MASSPOLE + MASSCART;
const LENGTH: f64 = 0.5;
const POLEMASS_LENGTH: f64 = MASSPOLE * LENGTH;
const FORCE_MAG: f64 = 10.0;
const TAU: f64 = 0.02;
const THETA_THRESHOLD: f64 = 12.0 * 2.0 * Math.PI / 360.0;
const X_THRESHOLD: f64 = 2.4;

class CartPole extends Env {
  x: f64 = 0;
  xDot: f64 = 0;
  theta: f64 = 0;
  thetaDot: f64 = 0;
  rng: PCG32 = new PCG32();

  seed(seed: u64): void {
    this.rng.seed(seed);
  }

  write(obs: usize): void {
    store<f32>(obs, <f32>this.x);
    store<f32>(obs, <f32>this.xDot, 4);
    store<f32>(obs, <f32>this.theta, 8);
    store<f32>(obs, <f32>this.thetaDot, 12);
  }

  reset(obs: usize): void {
    this.x = this.rng.uniform(-0.05, 0.05);
    this.xDot = this.rng.uniform(-0.05, 0.05);
    this.theta = this.rng.uniform(-0.05, 0.05);
    this.thetaDot = this.rng.uniform(-0.05, 0.05);
    this.terminated = false;
    this.truncated = false;
    this.write(obs);
  }

  // State: x, xDot, theta, thetaDot (f64) and the PCG32 (16 bytes).
  stateSize(): i32 { return 48; }

  save(buf: usize): void {
    store<f64>(buf, this.x);
    store<f64>(buf, this.xDot, 8);
    store<f64>(buf, this.theta, 16);
    store<f64>(buf, this.thetaDot, 24);
    this.rng.save(buf + 32);
  }

  restore(buf: usize): void {
    this.x = load<f64>(buf);
    this.xDot = load<f64>(buf, 8);
    this.theta = load<f64>(buf, 16);
    this.thetaDot = load<f64>(buf, 24);
    this.rng.restore(buf + 32);
  }

  step(action: usize, obs: usize): f32 {
    const force = load<f32>(action) == 1 ? FORCE_MAG : -FORCE_MAG;
    const costheta = Math.cos(this.theta);
    const sintheta = Math.sin(this.theta);
    const temp = (force + POLEMASS_LENGTH * this.thetaDot * this.thetaDot * sintheta) / TOTAL_MASS;
    const thetaacc = (GRAVITY * sintheta - costheta * temp) /
      (LENGTH * (4.0 / 3.0 - MASSPOLE * costheta * costheta / TOTAL_MASS));
    const xacc = temp - POLEMASS_LENGTH * thetaacc * costheta / TOTAL_MASS;
    this.x = this.x + TAU * this.xDot;
    this.xDot = this.xDot + TAU * xacc;
    this.theta = this.theta + TAU * this.thetaDot;
    this.thetaDot = this.thetaDot + TAU * thetaacc;
    this.terminated = this.x < -X_THRESHOLD || this.x > X_THRESHOLD ||
      this.theta < -THETA_THRESHOLD || this.theta > THETA_THRESHOLD;
    this.write(obs);
    return 1.0;
  }
}

registerEnv(
  '{"name":"cartpole-as","version":"1.0.0",' +
  '"description":"CartPole-v1 (Gymnasium dynamics) in AssemblyScript",' +
  '"observation_space":{"kind":"box","shape":[4],"low":[-4.8,-3.4028235e38,-0.41887903,-3.4028235e38],' +
  '"high":[4.8,3.4028235e38,0.41887903,3.4028235e38]},' +
  '"action_space":{"kind":"discrete","n":2},"max_episode_steps":500}',
  4, 1, 2, 500, (): Env => new CartPole());
