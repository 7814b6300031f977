"""The lexer's DFA, built from the language spec as a transition table [state, byte] at import time.

The DFA is written as one readable Python function, `step(state, byte)`, and tabulated for all 257
inputs (256 bytes + EOF), tinygrad-style: the pass that runs on tensors only looks up tables.
Per (state, byte) the table gives the next state, whether the byte starts a new token, and a lexical
error code (LEX_ERRORS: a diagnostic of lang/diagnostics.py) with where it is reported (at this byte,
at the byte before, or at the token's start).
Raw strings (an r in the prefix) have their own string states, so escape checks need only the state.
"""

from __future__ import annotations

import string

from ...lang import spec

EOF_BYTE = 256
N_INPUTS = 257

# lexical errors: code (4 bits) -> diagnostic id; where: 0 this byte, 1 previous byte, 2 the token's start.
# The host fills in a message's fields from the source at the error (compilers/traditional/diagnose.py);
# E_NONASCII at U+FEFF is a byte-order mark there.
(E_NONE, E_CHAR, E_NONASCII, E_UNTERM, E_NUMBER, E_COMPLEX, E_BACKSLASH, E_ESCAPE, E_UNMATCHED, E_CHAR_STRING,
 E_CHAR_COMMENT) = range(11)
LEX_ERRORS = {
    E_CHAR: "invalid_character",
    E_NONASCII: "non_ascii",
    E_UNTERM: "unterminated_string",
    E_NUMBER: "invalid_number",
    E_COMPLEX: "complex_number",
    E_BACKSLASH: "stray_backslash",
    E_ESCAPE: "string_escape",
    E_UNMATCHED: "unmatched_paren",
    E_CHAR_STRING: "invalid_character_in_string",
    E_CHAR_COMMENT: "invalid_character_in_comment",
}
AT_BYTE, AT_PREV, AT_TOKEN = 0, 1, 2

LETTERS = set(string.ascii_letters + "_")
DIGITS = set(string.digits)
NAME_CHARS = LETTERS | DIGITS
HEX = set(string.hexdigits)
_OPS = [op for op in spec.OPERATORS if not op.startswith(".")]
_OP_PREFIXES = {op[:k] for op in _OPS for k in range(1, len(op) + 1)}
_PREFIX_STATES = {"r": "p_r", "u": "p_u", "b": "p_b", "f": "p_f"}
_PREFIX_NEXT = {("p_r", "b"): "p_rb", ("p_b", "r"): "p_rb", ("p_r", "f"): "p_rf", ("p_f", "r"): "p_rf"}

NUMBER_STATES = ["n_zero1", "n_zero", "n_zero_us", "n_lz", "n_lz_us", "n_int", "n_int_us", "n_frac_start", "n_frac",
                 "n_frac_us", "n_exp", "n_exp_sign", "n_exp_dig", "n_exp_us", "n_hex_pfx", "n_hex_us", "n_hex",
                 "n_oct_pfx", "n_oct_us", "n_oct", "n_bin_pfx", "n_bin_us", "n_bin"]
NUMBER_ACCEPTING = {"n_zero1", "n_zero", "n_int", "n_frac_start", "n_frac", "n_exp_dig", "n_hex", "n_oct", "n_bin"}
_QUOTES = ("sq", "dq", "rsq", "rdq")  # ' and ", plain and raw
_STRING_STATES = [f"{s}_{q}" for q in _QUOTES for s in
                  ("open1", "open2", "s", "s_esc", "t", "t_esc", "t_q1", "t_q2")] + ["str_done"]
NAME_STATES = ["name", "p_r", "p_u", "p_b", "p_f", "p_rb", "p_rf"]
OP_STATES = ["op:" + p for p in sorted(_OP_PREFIXES)] + ["dot", "dot2", "dot3"]
STATES = ["start", "nl", "cont", "comment", "bs", "error", "eof"] + NAME_STATES + NUMBER_STATES + OP_STATES + \
    _STRING_STATES
STATE = {s: i for i, s in enumerate(STATES)}
ESCAPE_STATES = [s for s in _STRING_STATES if "_esc_" in s and not s.endswith(("_rsq", "_rdq"))]  # not raw

_DIGIT_SETS = {"hex": HEX, "oct": set("01234567"), "bin": set("01")}


def _is_control(b: int) -> bool:
    return (b < 32 and b not in (9, 10, 12)) or b == 127


def _number_next(state: str, c: str) -> str | None:
    digit = c in DIGITS
    e = c in "eE"
    if state in ("n_zero1", "n_zero"):  # a base prefix (0x, 0o, 0b) only after a single 0
        return {"0": "n_zero", "_": "n_zero_us", ".": "n_frac_start"}.get(c) or (
            "n_lz" if digit else "n_exp" if e else None) or (
            {"x": "n_hex_pfx", "o": "n_oct_pfx", "b": "n_bin_pfx"}.get(c.lower()) if state == "n_zero1" else None)
    if state == "n_zero_us":
        return "n_zero" if c == "0" else "n_lz" if digit else None
    if state in ("n_lz", "n_int"):
        return state if digit else {"_": state + "_us", ".": "n_frac_start"}.get(c) or ("n_exp" if e else None)
    if state in ("n_lz_us", "n_int_us"):
        return state[:-3] if digit else None
    if state in ("n_frac_start", "n_frac"):
        return "n_frac" if digit else "n_exp" if e else ("n_frac_us" if c == "_" and state == "n_frac" else None)
    if state == "n_frac_us":
        return "n_frac" if digit else None
    if state == "n_exp":
        return "n_exp_dig" if digit else "n_exp_sign" if c in "+-" else None
    if state in ("n_exp_sign", "n_exp_us"):
        return "n_exp_dig" if digit else None
    if state == "n_exp_dig":
        return "n_exp_dig" if digit else "n_exp_us" if c == "_" else None
    base, part = state[2:5], state[6:]
    digits = _DIGIT_SETS[base]
    if part in ("pfx", "us"):
        return f"n_{base}" if c in digits else (f"n_{base}_us" if c == "_" and part == "pfx" else None)
    return state if c in digits else f"n_{base}_us" if c == "_" else None


def _new_token(b: int) -> tuple[str, bool, int, int]:
    """The transition from between tokens on byte b: (state, starts a token, error, where)."""
    if b == EOF_BYTE:
        return "eof", False, E_NONE, AT_BYTE
    if _is_control(b):
        return "error", False, E_CHAR, AT_BYTE
    if b >= 128:
        return "error", False, E_NONASCII, AT_BYTE
    c = chr(b)
    if c == "\n":
        return "nl", False, E_NONE, AT_BYTE
    if c in " \t\f":
        return "start", False, E_NONE, AT_BYTE
    if c == "#":
        return "comment", False, E_NONE, AT_BYTE
    if c == "\\":
        return "bs", False, E_NONE, AT_BYTE
    if c in LETTERS:
        return _PREFIX_STATES.get(c.lower(), "name"), True, E_NONE, AT_BYTE
    if c in DIGITS:
        return ("n_zero1" if c == "0" else "n_int"), True, E_NONE, AT_BYTE
    if c == ".":
        return "dot", True, E_NONE, AT_BYTE
    if c in "'\"":
        return ("open1_sq" if c == "'" else "open1_dq"), True, E_NONE, AT_BYTE
    if c in _OP_PREFIXES:
        return "op:" + c, True, E_NONE, AT_BYTE
    return "error", False, E_CHAR, AT_BYTE


def _string_step(state: str, b: int) -> tuple[str, int, int] | None:
    """Inside a string: (next state, error, where), or None when the string has already ended."""
    if state == "str_done":
        return None
    kind, q = state.rsplit("_", 1)
    quote = "'" if q.endswith("sq") else '"'
    c = chr(b) if b < 128 else "\x80"
    if state.startswith("open2") and c != quote:
        return None  # the empty string '' ended
    if b == EOF_BYTE:
        return "error", E_UNTERM, AT_TOKEN
    if _is_control(b):
        return "error", E_CHAR_STRING, AT_BYTE
    if kind in ("s_esc",):
        return f"s_{q}", E_NONE, AT_BYTE
    if kind == "t_esc":
        return f"t_{q}", E_NONE, AT_BYTE
    single = kind in ("open1", "s")
    if c == "\\":
        return (f"s_esc_{q}" if single else f"t_esc_{q}"), E_NONE, AT_BYTE
    if single:
        if c == "\n":
            return "error", E_UNTERM, AT_TOKEN
        if c == quote:
            return (f"open2_{q}" if kind == "open1" else "str_done"), E_NONE, AT_BYTE
        return f"s_{q}", E_NONE, AT_BYTE
    if kind == "open2":  # the third quote opens a triple-quoted string
        return f"t_{q}", E_NONE, AT_BYTE
    if c == quote:
        return {"t": f"t_q1_{q}", "t_q1": f"t_q2_{q}", "t_q2": "str_done"}[kind], E_NONE, AT_BYTE
    return f"t_{q}", E_NONE, AT_BYTE


def step(state: str, b: int) -> tuple[str, bool, int, int]:
    """One DFA transition: (next state, byte starts a token, error code, where the error is reported)."""
    c = chr(b) if b < 128 else ""
    if state in ("error", "eof"):
        return state, False, E_NONE, AT_BYTE
    if state == "bs":
        return ("cont", False, E_NONE, AT_BYTE) if c == "\n" else ("error", False, E_BACKSLASH, AT_PREV)
    if state == "comment":
        if b == EOF_BYTE:
            return "eof", False, E_NONE, AT_BYTE
        if _is_control(b):
            return "error", False, E_CHAR_COMMENT, AT_BYTE
        return ("nl" if c == "\n" else "comment"), False, E_NONE, AT_BYTE
    if state in _STRING_STATES:
        r = _string_step(state, b)
        if r is not None:
            return r[0], False, r[1], r[2]
        return _new_token(b)
    if state in NAME_STATES:
        if state != "name" and c and c in "'\"":
            q = ("r" if state in ("p_r", "p_rb", "p_rf") else "") + ("sq" if c == "'" else "dq")
            return f"open1_{q}", False, E_NONE, AT_BYTE
        if c and c in NAME_CHARS:
            return _PREFIX_NEXT.get((state, c.lower()), "name"), False, E_NONE, AT_BYTE
        return _new_token(b)
    if state in NUMBER_STATES:
        nxt = _number_next(state, c) if c else None
        if nxt is not None:
            return nxt, False, E_NONE, AT_BYTE
        if state not in NUMBER_ACCEPTING:
            return "error", False, E_NUMBER, AT_TOKEN
        if c and c in "jJ":
            return "error", False, E_COMPLEX, AT_TOKEN
        if c and (c in NAME_CHARS or c == "."):
            return "error", False, E_NUMBER, AT_TOKEN
        return _new_token(b)
    if state == "dot":
        if c and c in DIGITS:
            return "n_frac", False, E_NONE, AT_BYTE
        if c == ".":
            return "dot2", False, E_NONE, AT_BYTE
        return _new_token(b)
    if state == "dot2" and c == ".":
        return "dot3", False, E_NONE, AT_BYTE
    if state.startswith("op:") and c and state[3:] + c in _OP_PREFIXES:
        return "op:" + state[3:] + c, False, E_NONE, AT_BYTE
    return _new_token(b)  # start, nl, cont, a finished operator or `..`/`...`


def token_kind_of_state(state: str) -> str | None:
    """The token kind a token has when its last byte leaves the DFA in `state` (None: not a token end)."""
    if state in NAME_STATES:
        return "name"
    if state in NUMBER_STATES:
        return "number"
    if state == "str_done" or state.startswith("open2_"):
        return "string"
    if state == "dot":
        return "."
    if state in ("dot2", "dot3"):
        return "bad-op"
    if state.startswith("op:"):
        op = state[3:]
        return op if op in spec.TOK else "bad-op"
    return None


def build_tables():
    """(next_state [S*257] int, flags [S*257] int) with flags = start | error << 1 | where << 5."""
    nxt, flags = [], []
    for s in STATES:
        for b in range(N_INPUTS):
            ns, start, err, where = step(s, b)
            nxt.append(STATE[ns])
            flags.append(int(start) | (err << 1) | (where << 5))
    return nxt, flags
