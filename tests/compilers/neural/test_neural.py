"""The neural compiler: its input/output languages, the constrained sampler, and the shipped checkpoint."""

import pytest
import torch

from jupyter_gpuiter import compile_batch
from jupyter_gpuiter.compilers.neural import CHECKPOINT, load_model, model_card, sample_candidates
from jupyter_gpuiter.compilers.neural import tokens as tk
from jupyter_gpuiter.compilers.neural.model import ModelConfig, Seq2Seq
from jupyter_gpuiter.compilers.neural.train import exact_match, init_model, make_dataset
from jupyter_gpuiter.compilers.serial import compile_source
from jupyter_gpuiter.generate import generate_batch
from jupyter_gpuiter.ir import Program
from jupyter_gpuiter.lang.errors import CompileError
from tests.support.edge_cases import INVALID, VALID
from tests.support.row_kernels import REAL, WRONG

ROW_KERNELS = [s for s, *_ in REAL.values()] + [s for s, _ in WRONG.values()] + [
    "def f(x):\n    return np.max(x) - math.min(x) + np.sum(x) * math.mean(x)\n",
    "def f(x, y):\n    return max(x, y) + max(x) + min(x, y, 1) + min(max(x + y))\n",  # folds beside reductions
    "def f(x):\n    s = sum(x)\n    s += mean(x - sum(x) / s)\n    return s\n",
    "def f(x, w):\n    return sum(w * (x - mean(mean(x) * x)) ** 2) / sum(w) + max(min(x) + x)\n",  # nested
    "def f(x):\n    return sum(x > 0) + mean(isnan(x)) + max(x > 1) + min(True)\n",  # bools reduced
    "def f(x):\n    return sum(2.0) + max(1) + mean(pi)\n",  # constants reduced
]


def round_trip(source: str) -> str:
    enc = tk.encode(source)
    return tk.decode(tk.postfix(source, enc), enc).text()


@pytest.mark.parametrize("source", VALID)
def test_postfix_round_trip_edge_cases(source):
    try:
        got = round_trip(source)
    except CompileError as e:  # the 300-term sum exceeds the model's input size: refused, not mistranslated
        assert e.kind == "too-large" and len(source) > tk.MAX_IN
        return
    assert got == compile_source(source).text()


def test_postfix_round_trip_generated():
    sources = generate_batch(1500, seed=11, max_chars=220) + generate_batch(300, seed=12)
    checked = 0
    for s in sources:
        try:
            got = round_trip(s)
        except CompileError as e:  # only programs beyond the model's input size may be refused
            assert e.kind == "too-large", (s, e)
            continue
        assert got == compile_source(s).text(), s
        checked += 1
    assert checked >= 1700


@pytest.mark.parametrize("source", ROW_KERNELS)
def test_postfix_round_trip_row_kernels(source):
    assert round_trip(source) == compile_source(source).text()


def test_postfix_round_trip_generated_row_kernels():
    sources = generate_batch(1000, seed=13, max_chars=220, rows=1.0) + generate_batch(200, seed=14, rows=1.0)
    checked = 0
    for s in sources:
        try:
            got = round_trip(s)
        except CompileError as e:
            assert e.kind == "too-large", (s, e)
            continue
        assert compile_source(s).reduces, s
        assert got == compile_source(s).text(), s
        checked += 1
    assert checked >= 1100


def test_reductions_are_one_operand_ops_and_folds_keep_their_count():
    post = tk.postfix("def f(x, y):\n    return np.max(x) + max(x, y) + math.sum(min(y)) + mean(x)\n")
    assert post == ["S0", "amax", "S0", "S1", "max", "#2", "add", "S1", "amin", "sum", "add", "S0", "mean", "add",
                    "RET"]
    assert all(tk.OP_ARITY[op] == 1 for op in ("sum", "mean", "amax", "amin"))
    enc = tk.encode("def f(x):\n    return max(x)\n")
    with pytest.raises(tk.DecodeError):  # a fold needs a count of 2 or more: one-argument max is amax
        tk.decode(["S0", "max", "#1", "RET"], enc)


def test_the_vocabulary_keeps_the_ids_of_older_checkpoints():
    """Tokens added since a vocabulary shipped go at the end, so its checkpoints can be fine-tuned."""
    import hashlib

    assert tk.PAST_VOCAB_SIZES == (152,)
    v1 = "\n".join(tk.VOCAB[:152])
    assert hashlib.sha256(v1.encode()).hexdigest()[:16] == "8dc887450e66ef1f"
    assert tk.VOCAB[152:] == ["mean", "sum", "amax", "amin"]
    assert len(set(tk.VOCAB)) == len(tk.VOCAB)
    from jupyter_gpuiter.lang import spec

    for name in [*spec.BUILTINS, *spec.REDUCTION_OPS, *spec.CONSTANTS]:  # every source and output word has an id
        assert name in tk.INDEX, name


def test_a_checkpoint_of_the_older_vocabulary_is_grown_for_fine_tuning(tmp_path):
    torch.manual_seed(0)
    config = ModelConfig(d_model=32, heads=2, encoder_layers=1, decoder_layers=1, ff=64, vocab=152)
    old = Seq2Seq(config)
    torch.save({"model": old.state_dict(), "model_config": config.to_dict()}, tmp_path / "old.pt")
    with pytest.raises(ValueError, match="other tokens"):  # as it is, the old model does not load
        load_model(tmp_path / "old.pt")
    grown = init_model(tmp_path / "old.pt")
    assert grown.config.vocab == len(tk.VOCAB) == 156
    assert torch.equal(grown.embed.weight[:152], old.embed.weight)
    assert torch.equal(grown.pos_in.weight, old.pos_in.weight)
    torch.save({"model": old.state_dict(), "model_config": {**config.to_dict(), "vocab": 150}}, tmp_path / "x.pt")
    with pytest.raises(ValueError, match="other tokens"):  # not a vocabulary this one grew from
        init_model(tmp_path / "x.pt")


def test_encode_reports_the_serial_lexical_and_rule_errors():
    for source, _ in INVALID:
        try:
            compile_source(source)
        except CompileError as serial_error:
            try:
                tk.encode(source)
            except CompileError as e:  # phases A/B are the serial compiler's own
                assert (e.kind, e.line, e.col) == (serial_error.kind, serial_error.line, serial_error.col)


def test_decode_rejects_malformed_postfix():
    enc = tk.encode("def f(x):\n    y = x + 1\n    return y\n")
    assert tk.decode(["S0", "NUM", "add", "SET", "S1", "S1", "RET"], enc).n_nodes == 2
    for bad in (["S0", "add", "RET"], ["S1", "RET"], ["S0", "NUM", "NUM", "add", "add", "RET"], ["S0"],
                ["S0", "S0", "RET"], ["S0", "NUM", "add", "RET", "S0"], ["S0", "RET"],  # a literal left over
                ["S0", "S0", "min", "#3", "NUM", "add", "RET"]):
        with pytest.raises(tk.DecodeError):
            tk.decode(bad, enc)


def test_constrained_sampling_only_writes_well_formed_programs():
    """Even an untrained model's finished outputs decode: the grammar mask keeps stacks, slots and
    literal counts consistent."""
    torch.manual_seed(0)
    model = Seq2Seq(ModelConfig(d_model=32, heads=2, encoder_layers=1, decoder_layers=1, ff=64)).eval()
    sources = generate_batch(40, seed=5, max_chars=120, rows=0.5) + ROW_KERNELS
    cands = sample_candidates(sources, k=3, temperature=1.0, model=model)
    finished = 0
    for enc, progs in zip(cands.encoded, cands.programs):
        assert len(progs) == 3
        for p in progs:
            if isinstance(p, tk.DecodeError):
                assert str(p).startswith("unfinished")
            else:
                finished += 1
                assert p.n_params == enc.n_params and p.ops[-1] == "ret"
    assert finished > 0


def texts(candidates) -> list[list[str]]:
    return [[p.text() if isinstance(p, Program) else str(p) for p in progs] for progs in candidates.programs]


def test_greedy_candidates_are_identical_and_sampling_is_seeded():
    model = load_model()
    sources = generate_batch(8, seed=21, max_chars=100)
    for first, second in texts(sample_candidates(sources, k=2, model=model)):
        assert first == second
    a = sample_candidates(sources, k=4, temperature=1.0, seed=3, model=model)
    assert texts(a) == texts(sample_candidates(sources, k=4, temperature=1.0, seed=3, model=model))


def test_shipped_checkpoint_size_and_card():
    assert CHECKPOINT.exists(), "the neural checkpoint ships in the package"
    assert CHECKPOINT.stat().st_size <= 20 * 2**20
    card = model_card()
    for key in ("command", "train_config", "model_config", "data_seed", "accuracy"):
        assert key in card, key


def test_shipped_checkpoint_accuracy_on_held_out_programs():
    """Exact match at k=1 on a fixed held-out set (a seed the training data never used)."""
    model = load_model()
    held_out = make_dataset(300, seed=90_001, min_chars=30, max_chars=160)
    short = [e for e in held_out if len(e[0]) <= 80]
    assert len(short) >= 60
    assert exact_match(model, short) >= 0.90
    assert exact_match(model, held_out) >= 0.75


def test_shipped_checkpoint_accuracy_on_held_out_row_kernels():
    model = load_model()
    held_out = make_dataset(200, seed=90_001, min_chars=30, max_chars=160, rows=1.0)
    assert exact_match(model, held_out) >= 0.85
    got = sample_candidates(ROW_KERNELS[:12], k=1, model=model).programs  # the real kernels
    assert sum(isinstance(p[0], Program) and p[0].text() == compile_source(s).text()
               for p, s in zip(got, ROW_KERNELS)) >= 10


def test_neural_mode_through_compile_batch():
    sources = generate_batch(30, seed=31, max_chars=100) + ["def f(x):\n    return x $ 1\n"]
    got = compile_batch(sources, mode="neural")
    want = compile_batch(sources, mode="serial").canonical()
    assert got.mode == "neural" and len(got) == len(sources)
    assert got.canonical()[-1] == want[-1]  # a lexical error is the serial compiler's
    assert sum(g == w for g, w in zip(got.canonical(), want)) >= 24
    with pytest.raises(TypeError, match="takes no option"):
        compile_batch(sources, mode="neural", k=4)


def test_the_session_keeps_one_resident_model():
    import jupyter_gpuiter as gi

    model = gi.current_session().neural_model()
    assert model is gi.current_session().neural_model() and not model.training


def test_input_size_limits_are_exact():
    def source(terms):  # 10 + 2 * terms tokens
        return "def f(x):\n    return x" + " + x" * terms + "\n"

    assert len(tk.encode(source(154)).ids) == tk.MAX_IN  # 318 tokens, BOS and EOS
    with pytest.raises(CompileError, match="input size"):
        tk.encode(source(155))
    names = "def f(" + ",".join(f"p{i}" for i in range(30)) + "):\n"
    ok = names + "".join(f"    q{i} = p0\n" for i in range(tk.MAX_SLOTS - 30)) + "    return p0\n"
    assert tk.encode(ok).n_slots == tk.MAX_SLOTS
    with pytest.raises(CompileError, match="input size"):
        tk.encode(names + "".join(f"    q{i} = p0\n" for i in range(tk.MAX_SLOTS - 29)) + "    return p0\n")


def test_decodes_hold_at_most_batch_sequences_whatever_k(monkeypatch):
    """One source with a large k was decoded in one batch of k sequences (~10 GB at k=100000)."""
    torch.manual_seed(0)
    model = Seq2Seq(ModelConfig(d_model=32, heads=2, encoder_layers=1, decoder_layers=1, ff=64)).eval()
    sizes = []
    sample = model.sample

    def recording(src, *args, k=1, **kw):
        sizes.append(src.shape[0] * k)
        return sample(src, *args, k=k, **kw)

    monkeypatch.setattr(model, "sample", recording)
    sources = generate_batch(3, seed=6, max_chars=80)
    cands = sample_candidates(sources, k=10, temperature=1.0, model=model, batch_sequences=4)
    assert [len(p) for p in cands.programs] == [10, 10, 10]
    assert max(sizes) <= 4 and sum(sizes) == 30
    with pytest.raises(ValueError, match="between 1 and 1024"):
        sample_candidates(sources, k=100_000, model=model)
