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

/** Where a row kernel's counterexample lies: the row's length, its failing element (null when the
 * result is one value per row) and the index of the first element `inputs` shows. */
export interface IRowPlace {
  length: number;
  position: number | null;
  start: number;
}

export interface ICounterexample {
  inputs: { [name: string]: number | null | (number | null)[] };
  row?: IRowPlace;
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

/** A counterexample as one line: `x=0.5: got 1, expected 2`, or for a row kernel
 * `row of 33, element 5: x=[… 2 more, 0.1, 0.2, …]: got 0.3, expected 0.4`. */
export function formatCounterexample(c: ICounterexample): string {
  const row = c.row;
  const value = (x: number | null | (number | null)[]): string => {
    if (!Array.isArray(x) || !row) {
      return `${x}`;
    }
    const before = row.start > 0 ? [`… ${row.start} more`] : [];
    const left = row.length - row.start - x.length;
    const after = left > 0 ? [`… ${left} more`] : [];
    return `[${[...before, ...x.map(e => `${e}`), ...after].join(', ')}]`;
  };
  const inputs = Object.entries(c.inputs)
    .map(([k, x]) => `${k}=${value(x)}`)
    .join(', ');
  const where = row
    ? `row of ${row.length}${row.position === null ? '' : `, element ${row.position}`}: `
    : '';
  return `counterexample: ${where}${inputs}: got ${c.got}, expected ${c.expected}`;
}
