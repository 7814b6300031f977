"""Input pools: seeded generation on the device, domains, special values, memoisation, exhaustive mode."""

import math

import pytest
import torch

from jupyter_gpuiter.verification import pools
from jupyter_gpuiter.verification.pools import (
    Domain,
    InputPool,
    as_domain,
    domain_edges,
    exhaustive_inputs,
    make_inputs,
    parse_domain,
    parse_domains,
    special_values,
)

DTYPES = ["float16", "bfloat16", "float32", "float64"]
TORCH = {"float16": torch.float16, "bfloat16": torch.bfloat16, "float32": torch.float32, "float64": torch.float64}
INT = {"float16": torch.int16, "bfloat16": torch.int16, "float32": torch.int32, "float64": torch.int64}


def bits(x: torch.Tensor) -> torch.Tensor:
    """Bit patterns, so that nan == nan and -0 != +0 in comparisons."""
    return x.view({2: torch.int16, 4: torch.int32, 8: torch.int64}[x.element_size()])


def special_bits(dtype) -> set[int]:
    return set(bits(special_values(dtype, device="cpu")).tolist())


# --------------------------------------------------------------------------------------------
# determinism and shapes


@pytest.mark.parametrize("dtype", DTYPES)
def test_same_seed_same_inputs_other_seed_other_inputs(dtype):
    doms = [None, Domain(-5, 5), Domain(1e-3, 1e3, log=True)]
    a = make_inputs(3, 1000, dtype=dtype, domains=doms, seed=7, device="cpu")
    b = make_inputs(3, 1000, dtype=dtype, domains=doms, seed=7, device="cpu")
    c = make_inputs(3, 1000, dtype=dtype, domains=doms, seed=8, device="cpu")
    assert torch.equal(bits(a), bits(b))
    for row in range(3):
        assert not torch.equal(bits(a[row]), bits(c[row]))


def test_rows_are_independent_of_other_parameters():
    a = make_inputs(2, 500, domains=[None, None], seed=3, device="cpu")
    b = make_inputs(2, 500, domains=[None, Domain(0, 1)], seed=3, device="cpu")
    c = make_inputs(3, 500, seed=3, device="cpu")
    assert torch.equal(bits(a[0]), bits(b[0]))  # changing parameter 1's domain leaves parameter 0 alone
    assert torch.equal(bits(a), bits(c[:2]))
    assert not torch.equal(bits(a[0]), bits(a[1]))  # parameters do not share one stream


@pytest.mark.parametrize("n", [0, 1, 7, 1000])
@pytest.mark.parametrize("dtype", DTYPES)
def test_shapes_with_tails(n, dtype):
    x = make_inputs(2, n, dtype=dtype, domains=[None, Domain(-1, 1)], seed=1, device="cpu")
    assert x.shape == (2, n)
    assert x.dtype == TORCH[dtype]
    assert x.device.type == "cpu"
    if n:
        assert bool(((x[1] >= -1) & (x[1] <= 1)).all())


def test_zero_parameters_and_dtype_objects():
    assert make_inputs(0, 5, device="cpu").shape == (0, 5)
    assert make_inputs(1, 5, dtype=torch.float64, device="cpu").dtype == torch.float64


# --------------------------------------------------------------------------------------------
# domains


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize(
    "dom",
    [
        Domain(-5, 5),
        Domain(0.1, 0.3),  # bounds not representable in any binary dtype
        Domain(1e-3, 1e3, log=True),
        Domain(-1e3, -1e-3, log=True),
        Domain(-1e10, 1e10),  # beyond float16's range: clipped to it
        Domain(2.0, 2.5),
    ],
)
def test_domain_respected_and_edges_present(dtype, dom):
    x = make_inputs(1, 1000, dtype=dtype, domains=[dom], seed=11, device="cpu")[0]
    lo, hi = domain_edges(dom, dtype)
    assert lo >= dom.low and hi <= dom.high
    x64 = x.to(torch.float64)
    assert bool(torch.isfinite(x64).all())
    assert float(x64.min()) == lo and float(x64.max()) == hi  # edges inserted, nothing outside
    assert dom.low <= lo and hi <= dom.high
    # the samples are spread, not just the edges and specials
    assert x.unique().numel() > (20 if dtype in ("float16", "bfloat16") else 500)


@pytest.mark.parametrize("dtype", DTYPES)
def test_rounding_never_leaves_narrow_domains(dtype):
    """Domains a few ULPs wide: float rounding of the samples (exp/log included) stays inside."""
    eps = torch.finfo(TORCH[dtype]).eps
    doms = [
        Domain(1 + 0.3 * eps, 1 + 2.6 * eps),
        Domain(100, 100 * (1 + 5 * eps), log=True),
        Domain(-1e4 * (1 + 5 * eps), -1e4, log=True),
        Domain(1 + 0.3 * eps, 1 + 2.6 * eps, log=True),
    ]
    x = make_inputs(len(doms), 5000, dtype=dtype, domains=doms, seed=0, special_share=0.0, device="cpu")
    for row, dom in zip(x.to(torch.float64), doms):
        assert dom.low <= float(row.min()) and float(row.max()) <= dom.high, dom


def test_domain_specials_are_the_ones_inside():
    x = make_inputs(1, 2000, domains=[Domain(-5, 5)], seed=2, device="cpu")[0]
    b = set(bits(x).tolist())
    inside = [0.0, -0.0, 1.0, -1.0, 0.5, -2.0, 3.0, torch.finfo(torch.float32).tiny]
    for v in inside:
        assert bits(torch.tensor([v], dtype=torch.float32)).item() in b, v
    y = make_inputs(1, 2000, domains=[Domain(1, 2)], seed=2, device="cpu")[0]
    assert bool(((y >= 1) & (y <= 2)).all())
    assert not bool((y == 0).any())


def test_edges_inserted_even_when_share_rounds_to_zero():
    x = make_inputs(1, 7, domains=[Domain(-3, 4)], seed=0, special_share=0.0, device="cpu")[0]
    assert -3.0 in x.tolist() and 4.0 in x.tolist()
    one = make_inputs(1, 1, domains=[Domain(-3, 4)], seed=0, device="cpu")[0]
    assert one.tolist() == [-3.0]


def test_log_spacing_is_log_uniform():
    x = make_inputs(1, 20000, domains=[Domain(1e-3, 1e3, log=True)], seed=5, device="cpu")[0]
    below_one = float((x < 1).double().mean())
    assert 0.45 < below_one < 0.55  # a linear domain would put ~0.1% below 1
    decade = float(((x >= 1e-3) & (x < 1e-2)).double().mean())
    assert 0.14 < decade < 0.20
    neg = make_inputs(1, 2000, domains=[Domain(-1e3, -1e-3, log=True)], seed=5, device="cpu")[0]
    assert bool((neg < 0).all()) and 0.4 < float((neg > -1).double().mean()) < 0.6


def test_default_mix_uniform_and_log_magnitudes():
    x = make_inputs(1, 40000, seed=9, special_share=0.0, device="cpu")[0].double()
    assert bool(torch.isfinite(x).all())
    big = float((x.abs() > 10).double().mean())  # only the log half reaches beyond 10: 1/2 * 5/12
    assert 0.18 < big < 0.24
    tiny = float((x.abs() < 1e-3).double().mean())  # only the log half: 1/2 * 3/12
    assert 0.10 < tiny < 0.15
    assert 0.45 < float((x < 0).double().mean()) < 0.55
    assert 1e5 < float(x.abs().max()) <= 1e6 * (1 + 1e-6)
    h = make_inputs(1, 40000, dtype="float16", seed=9, special_share=0.0, device="cpu")[0]
    assert bool(torch.isfinite(h).all())  # magnitudes clipped to float16's largest finite value


# --------------------------------------------------------------------------------------------
# special values


@pytest.mark.parametrize("dtype", DTYPES)
def test_special_values_cover_each_category(dtype):
    s = special_values(dtype, device="cpu")
    dt = TORCH[dtype]
    fi = torch.finfo(dt)
    assert s.dtype == dt and s.dim() == 1
    v = s.to(torch.float64)
    zeros = s[v == 0]
    assert sorted(torch.signbit(zeros).tolist()) == [False, True]  # +0 and -0
    assert bool((v == math.inf).any()) and bool((v == -math.inf).any())
    assert bool(torch.isnan(v).any())
    for want in (1.0, -1.0, fi.tiny, -fi.tiny, fi.max, -fi.max):
        assert bool((v == want).any()), want
    sub = v[(v > 0) & (v < fi.tiny)]
    assert sub.numel() == 1 and bits(sub.to(dt)).item() == 1  # the smallest subnormal
    assert bool((v == -float(sub)).any())
    ordinary = v[torch.isfinite(v) & (v.abs() >= fi.tiny) & (v.abs() != 1) & (v.abs() != fi.max)]
    assert ordinary.numel() >= 3


@pytest.mark.parametrize("share", [0.0, 0.02, 0.1])
@pytest.mark.parametrize("dtype", ["float16", "float32"])
def test_specials_inserted_at_the_share_requested(share, dtype):
    n = 10000
    x = make_inputs(2, n, dtype=dtype, seed=4, special_share=share, device="cpu")
    sb = special_bits(dtype)
    for row in range(2):
        hits = sum(b in sb for b in bits(x[row]).tolist())
        want = round(share * n)
        assert want <= hits <= want + 10, (row, hits)  # a sample can rarely equal 0.5, -2 or 3
    if share:
        # each parameter gets its own positions
        assert not torch.equal(torch.isnan(x[0]), torch.isnan(x[1]))


def test_specials_spread_over_every_chunk():
    """A verifier that stops at the first failing chunk still meets its share of specials early."""
    x = make_inputs(2, 100_000, seed=1, device="cpu")
    sb = special_bits("float32")
    for row in range(2):
        flags = torch.tensor([b in sb for b in bits(x[row]).tolist()])
        per_chunk = flags.reshape(100, 1000).sum(dim=1)
        assert int(per_chunk.min()) >= 20 and int(per_chunk.max()) <= 22


@pytest.mark.parametrize("dtype", DTYPES)
def test_long_rows_are_drawn_in_blocks_with_the_same_rules(dtype, monkeypatch):
    """A row longer than SAMPLE_BLOCK is drawn block by block (O(block) work memory): still deterministic,
    inside its domain, with its edges and specials, and each block drawn afresh from the row's generator."""
    monkeypatch.setattr(pools, "SAMPLE_BLOCK", 1000)
    doms = [None, Domain(-5, 5), Domain(1e-3, 1e3, log=True)]
    a = make_inputs(3, 4500, dtype=dtype, domains=doms, seed=2, device="cpu")
    assert torch.equal(bits(a), bits(make_inputs(3, 4500, dtype=dtype, domains=doms, seed=2, device="cpu")))
    assert bool(((a[1] >= -5) & (a[1] <= 5)).all()) and bool(((a[2] >= 1e-3) & (a[2] <= 1e3)).all())
    assert {-5.0, 5.0} <= set(a[1].double().tolist())
    assert special_bits(dtype) <= set(bits(a[0]).tolist())
    for row in range(3):
        assert not torch.equal(bits(a[row, :1000]), bits(a[row, 1000:2000]))
    # a row within one block is drawn as before, in one call
    small = make_inputs(3, 1000, dtype=dtype, domains=doms, seed=2, device="cpu")
    monkeypatch.setattr(pools, "SAMPLE_BLOCK", 1 << 22)
    assert torch.equal(bits(small), bits(make_inputs(3, 1000, dtype=dtype, domains=doms, seed=2, device="cpu")))


@pytest.mark.parametrize("dtype", DTYPES)
def test_every_special_present_when_share_allows(dtype):
    x = make_inputs(3, 1000, dtype=dtype, seed=6, device="cpu")  # 20 slots for 17 specials
    sb = special_bits(dtype)
    for row in range(3):
        assert sb <= set(bits(x[row]).tolist())


# --------------------------------------------------------------------------------------------
# parsing


def test_parse_domain_forms():
    assert parse_domain("x=-5:5") == ("x", Domain(-5.0, 5.0))
    assert parse_domain(" y = 1e-3 : 1e3 : log ") == ("y", Domain(1e-3, 1e3, True))
    assert parse_domain("z=-1e3:-1e-3:LOG") == ("z", Domain(-1e3, -1e-3, True))
    assert parse_domains(["x=-5:5", "y=0:1"]) == {"x": Domain(-5, 5), "y": Domain(0, 1)}
    assert parse_domains("x=-5:5, y=0:1") == {"x": Domain(-5, 5), "y": Domain(0, 1)}
    assert as_domain((0, 2)) == Domain(0, 2) and as_domain("1:2:log") == Domain(1, 2, True)
    assert as_domain(None) is None


@pytest.mark.parametrize(
    "text, needle",
    [
        ("x=5", "must look like NAME=LOW:HIGH or NAME=LOW:HIGH:log"),
        ("x", "must look like NAME=LOW:HIGH"),
        ("x=", "must look like NAME=LOW:HIGH"),
        ("x=1:2:3:4", "must look like NAME=LOW:HIGH"),
        ("x=5:1", "low (5) must be below high (1)"),
        ("x=1:1", "must be below"),
        ("x=a:1", "low bound 'a' is not a number"),
        ("x=0:inf", "high bound must be finite"),
        ("x=-inf:0", "low bound must be finite"),
        ("x=nan:1", "not nan"),
        ("x=-1:1:log", "same side of zero"),
        ("x=0:1:log", "same side of zero"),
        ("x=1:2:lin", "unknown option 'lin'"),
        ("1x=1:2", "'1x' is not a parameter name"),
    ],
)
def test_bad_domains_say_what_was_expected(text, needle):
    with pytest.raises(ValueError) as err:
        parse_domain(text)
    assert needle in str(err.value)
    assert repr(text.strip()) in str(err.value)  # names the offending domain


def test_bad_domain_objects_and_lists():
    with pytest.raises(ValueError, match="given twice"):
        parse_domains(["x=0:1", "x=1:2"])
    with pytest.raises(ValueError, match="finite"):
        Domain(0, math.inf)
    with pytest.raises(ValueError, match="below"):
        Domain(2, 1)
    with pytest.raises(ValueError, match="same side of zero"):
        Domain(-1, 1, log=True)
    with pytest.raises(ValueError, match="2 domains for 3 parameters"):
        make_inputs(3, 10, domains=[None, None], device="cpu")
    with pytest.raises(ValueError, match="special_share"):
        make_inputs(1, 10, special_share=1.5, device="cpu")
    with pytest.raises(ValueError, match="no finite float16 value"):
        make_inputs(1, 10, dtype="float16", domains=[Domain(1e5, 1e6)], device="cpu")
    with pytest.raises(ValueError, match="unknown dtype"):
        make_inputs(1, 10, dtype="int8", device="cpu")


# --------------------------------------------------------------------------------------------
# pools


def test_pool_memoises_and_counts_bytes():
    pool = InputPool("cpu")
    a = pool.get(2, 100, "float32", [None, Domain(0, 1)], 0)
    assert pool.get(2, 100, "float32", [None, Domain(0, 1)], 0) is a
    assert pool.get(2, 100, torch.float32, (None, Domain(0.0, 1.0)), 0) is a  # normalised key
    b = pool.get(2, 100, "float32", [None, Domain(0, 1)], 1)
    assert b is not a and not torch.equal(a, b)
    c = pool.get(2, 100, "float64", None, 0)
    assert torch.equal(bits(a), bits(make_inputs(2, 100, domains=[None, Domain(0, 1)], device="cpu")))
    assert pool.nbytes == 2 * 100 * 4 * 2 + 2 * 100 * 8 == sum(t.numel() * t.element_size() for t in (a, b, c))
    assert (pool.hits, pool.misses, len(pool)) == (2, 3, 3)
    pool.clear()
    assert pool.nbytes == 0 and len(pool) == 0
    assert pool.get(2, 100, "float32", [None, Domain(0, 1)], 0) is not a


def test_pool_budget_error_and_lru_eviction():
    pool = InputPool("cpu", max_bytes=3 * 4000)  # three 1 x 1000 float32 pools
    with pytest.raises(ValueError) as err:
        pool.get(1, 3001, "float32", None, 0)
    msg = str(err.value)
    assert "N too large for memory" in msg and "12,004 bytes requested" in msg and "budget 12,000" in msg
    assert pool.nbytes == 0  # nothing allocated
    a = pool.get(1, 1000, "float32", None, 0)
    b = pool.get(1, 1000, "float32", None, 1)
    c = pool.get(1, 1000, "float32", None, 2)
    assert pool.get(1, 1000, "float32", None, 0) is a  # a is now the most recently used
    d = pool.get(1, 1000, "float32", None, 3)  # evicts b, the least recently used
    assert pool.nbytes == 12000 and len(pool) == 3
    assert pool.get(1, 1000, "float32", None, 0) is a
    assert pool.get(1, 1000, "float32", None, 2) is c
    assert pool.get(1, 1000, "float32", None, 3) is d
    assert pool.get(1, 1000, "float32", None, 1) is not b  # regenerated (equal values, new tensor)
    big = pool.get(1, 3000, "float32", None, 9)  # fills the budget alone: everything else evicted
    assert len(pool) == 1 and pool.nbytes == 12000 and big.shape == (1, 3000)


# --------------------------------------------------------------------------------------------
# exhaustive


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_exhaustive_inputs_are_all_bit_patterns(dtype):
    x = exhaustive_inputs(1, dtype, device="cpu")
    assert x.shape == (1, 65536) and x.dtype == TORCH[dtype]
    b = x.view(torch.int16)
    assert b.unique().numel() == 65536
    assert int(b.min()) == -32768 and int(b.max()) == 32767
    assert bool(torch.isnan(x).any()) and bool(torch.isinf(x).any())


def test_exhaustive_inputs_errors():
    with pytest.raises(ValueError, match="only for float16 and bfloat16"):
        exhaustive_inputs(1, "float32")
    with pytest.raises(ValueError, match="GPU"):
        exhaustive_inputs(2, "float16")
    with pytest.raises(ValueError, match="exactly one"):
        exhaustive_inputs(3, "bfloat16")


@pytest.mark.gpu
def test_on_cuda_deterministic_and_resident():
    x = make_inputs(2, 1003, domains=[None, Domain(-5, 5)], seed=1, device="cuda")
    y = make_inputs(2, 1003, domains=[None, Domain(-5, 5)], seed=1, device="cuda")
    assert x.device.type == "cuda" and torch.equal(bits(x), bits(y))
    assert bool(((x[1] >= -5) & (x[1] <= 5)).all())
    assert special_bits("float32") <= set(bits(x[0]).tolist())
    assert exhaustive_inputs(1, "bfloat16", device="cuda").device.type == "cuda"
    assert InputPool("cuda").get(1, 10).device.type == "cuda"
