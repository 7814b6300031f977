/**
 * The `jupyter_gpuiter` comm protocol (docs/protocol.md): what the kernel sends, and the one message
 * the frontend sends back (`sync`).
 */

export const TARGET = 'jupyter_gpuiter';
export const PROTOCOL_VERSION = 1;

export interface ILastVerdict {
  name: string;
  passed: boolean;
  sentence: string;
}

/** `status`: the Session, after every `%%gpucompile` and on `%gpuiter status`. */
export interface IStatus {
  type: 'status';
  version: number;
  device: string;
  cached_kernels: number;
  iterations: number;
  last: ILastVerdict | null;
}

export interface ICompileError {
  kind: string;
  line: number;
  col: number;
  message: string;
}

export interface ICounterexample {
  inputs: { [name: string]: number | null };
  got: number | null;
  expected: number | null;
}

/** `verdict`: one verified (or failed-to-compile) `%%gpucompile` cell. */
export interface IVerdict {
  type: 'verdict';
  version: number;
  name: string;
  mode: string;
  passed: boolean;
  exhaustive: boolean;
  tests: number;
  failures: number;
  epsilon: number | null;
  delta: number | null;
  sentence: string;
  counterexample: ICounterexample | null;
  error: ICompileError | null;
  seconds: { [phase: string]: number };
  /** When the kernel sent it (seconds since the epoch); absent from older kernels. */
  at?: number;
}

/** `history`: the kernel's answer to `sync`, every verdict it has sent, oldest first. */
export interface IHistory {
  type: 'history';
  version: number;
  verdicts: IVerdict[];
}

export type Message = IStatus | IVerdict | IHistory;

/** The message in a comm payload, or null for anything this frontend does not understand. */
export function asMessage(data: unknown): Message | null {
  if (data === null || typeof data !== 'object') {
    return null;
  }
  const type = (data as { type?: unknown }).type;
  if (type === 'status' || type === 'verdict' || type === 'history') {
    return data as Message;
  }
  return null;
}

/** PASS, FAIL or ERROR (a compile error), with PROVED for an exhaustive pass. */
export function outcome(v: IVerdict): 'PROVED' | 'PASS' | 'FAIL' | 'ERROR' {
  if (v.error) {
    return 'ERROR';
  }
  if (!v.passed) {
    return 'FAIL';
  }
  return v.exhaustive ? 'PROVED' : 'PASS';
}

/** Total seconds over the phases. */
export function totalSeconds(v: IVerdict): number {
  return Object.values(v.seconds || {}).reduce((a, b) => a + (Number(b) || 0), 0);
}

/** A duration for people: 850 µs, 12.3 ms, 1.25 s. */
export function formatSeconds(s: number): string {
  if (!isFinite(s)) {
    return '–';
  }
  if (s < 1e-3) {
    return `${(s * 1e6).toPrecision(3)} µs`;
  }
  if (s < 1) {
    return `${(s * 1e3).toPrecision(3)} ms`;
  }
  return `${s.toPrecision(3)} s`;
}

/** ε for people: 1.0e-3, "0" for a proof, "–" when there is none. */
export function formatEpsilon(v: IVerdict): string {
  if (v.error || !v.passed) {
    return '–';
  }
  if (v.exhaustive) {
    return '0';
  }
  return v.epsilon === null ? '–' : v.epsilon.toExponential(1);
}
