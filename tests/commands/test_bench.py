"""`ember bench` in llama-bench's shape (issue 19): its list syntax and loop order, its
-o json/jsonl/csv fields with values that agree with each other and with the file, its
markdown table, and Ember's bound columns. Speeds themselves are not asserted (benchmarks
print numbers; tests check they are computed right)."""
from __future__ import annotations

import contextlib
import csv
import io
import json
import statistics
import sys

import pytest
from ember.commands import bench as bench_module
from ember.commands import cli
from ember.commands.bench import EMBER_FIELDS, LLAMA_FIELDS, parse_int_list
from gguf import GGUFReader

pytestmark = pytest.mark.native


def bench(*argv) -> str:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        rc = cli.main(["bench", *map(str, argv)])
    assert rc == 0, err.getvalue()
    return out.getvalue()


@pytest.fixture(scope="module")
def records(starter_model_path):
    text = bench("-m", starter_model_path, "-p", "8,16", "-n", "4", "-t", "1,2", "-d", "0,8",
                 "-r", "3", "-o", "json")
    return json.loads(text)


def test_list_syntax_is_llama_benchs():
    # llama-bench.cpp parse_int_range: first[-last[(+|*)step]], comma-separated
    assert parse_int_list("128,512") == [128, 512]
    assert parse_int_list("8-32+8") == [8, 16, 24, 32]
    assert parse_int_list("1-16*2") == [1, 2, 4, 8, 16]
    assert parse_int_list("4-6") == [4, 5, 6]
    for bad in ("", "a", "8-4x2", "1-4*1"):
        with pytest.raises(ValueError):
            parse_int_list(bad)


def test_one_record_per_test_in_llama_benchs_order(records):
    # threads outermost, then depth, then the pp tests, then the tg tests
    got = [(r["n_threads"], r["n_depth"], r["n_prompt"], r["n_gen"]) for r in records]
    want = [(t, d, p, n) for t in (1, 2) for d in (0, 8)
            for p, n in ((8, 0), (16, 0), (0, 4))]
    assert got == want


def test_json_has_llama_benchs_fields_and_consistent_values(records, starter_model_path):
    reader = GGUFReader(starter_model_path)
    size = sum(int(t.n_bytes) for t in reader.tensors)
    n_params = sum(int(t.n_elements) for t in reader.tensors)
    for r in records:
        assert list(r)[:len(LLAMA_FIELDS)] == LLAMA_FIELDS
        assert set(EMBER_FIELDS) | {"samples_ns", "samples_ts"} <= set(r)
        assert r["model_size"] == size and r["model_n_params"] == n_params
        assert len(r["samples_ns"]) == len(r["samples_ts"]) == 3
        n_tok = r["n_prompt"] + r["n_gen"]
        for ns, ts in zip(r["samples_ns"], r["samples_ts"]):
            assert ts == pytest.approx(1e9 * n_tok / ns, rel=1e-12)
        assert r["avg_ts"] == pytest.approx(statistics.fmean(r["samples_ts"]), rel=1e-12)
        assert r["stddev_ts"] == pytest.approx(statistics.stdev(r["samples_ts"]), rel=1e-9)
        assert abs(r["avg_ns"] - statistics.fmean(r["samples_ns"])) <= 1
        if r["n_gen"]:
            # the decode bound: bytes read per token over the bandwidth probed beside each
            # run; the share is each run's against its own bound, averaged
            bws = r["read_bandwidth_samples_gbs"]
            assert len(bws) == 3 and min(bws) > 0
            bounds = [bw * 1e9 / r["weight_bytes_per_token"] for bw in bws]
            assert r["read_bandwidth_gbs"] == pytest.approx(statistics.fmean(bws), rel=1e-12)
            assert r["bound_ts"] == pytest.approx(statistics.fmean(bounds), rel=1e-12)
            assert r["bound_pct"] == pytest.approx(
                100 * statistics.fmean(ts / b for ts, b in zip(r["samples_ts"], bounds)), rel=1e-12)
        else:
            assert r["bound_ts"] is None and r["bound_pct"] is None
            assert r["read_bandwidth_samples_gbs"] is None
        assert r["peak_rss_bytes"] > 0


def decode_matrix_bytes(path) -> int:
    """What a one-token decode reads of a GGUF's weights, from the file's own tensor list:
    every matrix once, except an untied token_embd (one row of it is looked up), and of a
    mixture of experts' expert tensors [in, out, n_expert] the used share (k of n). Biases
    (2-D for experts: [out, n_expert]) are added, not multiplied: not counted."""
    r = GGUFReader(path)
    arch = str(bytes(r.fields["general.architecture"].parts[-1]), "utf-8")
    count = lambda key: int(r.fields[key].parts[-1][0]) if key in r.fields else 0  # noqa: E731
    n_expert, n_used = count(f"{arch}.expert_count"), count(f"{arch}.expert_used_count")
    untied = any(t.name == "output.weight" for t in r.tensors)
    total = 0
    for t in r.tensors:
        if len(t.shape) < 2 or t.name.endswith(".bias") or (untied and t.name == "token_embd.weight"):
            continue
        experts = n_expert and len(t.shape) == 3 and int(t.shape[2]) == n_expert
        total += int(t.n_bytes) * n_used // n_expert if experts else int(t.n_bytes)
    return total


def test_read_rate_probe_reads_what_a_decode_reads(starter_model_path):
    """The bound's probe reads the decode's matrices, each once (the tied head is both the
    embedding and the output product: counted once), from the kernels' copy or the file."""
    from ember.engine import Model
    m = Model(starter_model_path, n_ctx=64, n_threads=2)
    try:
        m.decode([1], 0)
        m.layout_progress(wait=True)
        gbs, n = m.read_bandwidth(0.0)
        assert n == decode_matrix_bytes(starter_model_path)
        assert gbs > 0
    finally:
        m.close()


@pytest.mark.parametrize("family", ["qwen3moe", "gpt-oss"])
def test_the_probe_of_a_mixture_of_experts_reads_the_used_experts(family):
    """A decode reads k of the n experts: the bound's probe reads as many bytes, and so does
    the per-token figure ember bench divides by (not the whole file)."""
    from ember.engine import Model
    from tools import make_arch_models
    path = make_arch_models.build(family)
    m = Model(path, n_ctx=64, n_threads=2)
    try:
        m.decode([1], 0)
        m.layout_progress(wait=True)
        _, n = m.read_bandwidth(0.0)
        want = decode_matrix_bytes(path)
        assert n == want
        tensors = m.tensors()
        everything = sum(x.n_bytes for x in tensors if len(x.shape) >= 2 and x.name != "token_embd.weight"
                         and not x.name.endswith(".bias"))
        assert everything - bench_module._unread_expert_bytes(m, tensors) == want
    finally:
        m.close()


def test_runs_are_timed_once_the_weights_are_in_the_kernels_layout(starter_model_path, monkeypatch):
    """Steady state, as llama-bench's: a background thread builds the kernels' copy of the
    weights after the load; runs timed during it read the file's layout, and are slower."""
    from ember.commands import bench as bench_mod
    seen = []
    timed = bench_mod._time_test

    def spy(model, *args, **kwargs):
        seen.append(model.layout_progress())
        return timed(model, *args, **kwargs)

    monkeypatch.setattr(bench_mod, "_time_test", spy)
    bench("-m", starter_model_path, "-p", "8", "-n", "2", "-t", "2", "-r", "1")
    assert seen and all(p == 1.0 for p in seen), seen


def test_kv_cache_at_depth_is_in_the_bound(records):
    tg = {(r["n_threads"], r["n_depth"]): r for r in records if r["n_gen"]}
    for t in (1, 2):
        # SmolLM2-135M: 30 layers, 3 KV heads of 64, F16 K and V (REFERENCE.md)
        extra = tg[(t, 8)]["weight_bytes_per_token"] - tg[(t, 0)]["weight_bytes_per_token"]
        assert extra == 30 * 8 * 3 * (64 + 64) * 2


def test_jsonl_csv_and_markdown_carry_the_same_tests(starter_model_path):
    args = ("-m", starter_model_path, "-p", "8", "-n", "2", "-t", "2", "-r", "2")
    lines = [json.loads(x) for x in bench(*args, "-o", "jsonl").splitlines()]
    assert [(r["n_prompt"], r["n_gen"]) for r in lines] == [(8, 0), (0, 2)]
    rows = list(csv.reader(io.StringIO(bench(*args, "-o", "csv"))))
    assert rows[0] == LLAMA_FIELDS + EMBER_FIELDS and len(rows) == 3
    for row in rows[1:]:
        rec = dict(zip(rows[0], row))
        assert float(rec["avg_ts"]) > 0 and rec["n_threads"] == "2"
    md = bench(*args).splitlines()
    assert md[0].split("|")[1].strip() == "model" and "t/s" in md[0] and "% of bound" in md[0]
    tests = [line.split("|")[6].strip() for line in md[2:]]
    assert tests == ["pp8", "tg2"]


def test_depth_names_the_test_as_llama_bench(starter_model_path):
    md = bench("-m", starter_model_path, "-p", "4", "-n", "0", "-d", "8", "-t", "2", "-r", "1")
    assert md.splitlines()[2].split("|")[6].strip() == "pp4 @ d8"


def test_json_summary_of_one_run_still_works(starter_model_path):
    """benchmarks/compare_llamacpp.py reads `--json`'s one object."""
    data = json.loads(bench("-m", starter_model_path, "-p", "8", "-n", "2", "-t", "2", "-r", "1",
                            "--json").splitlines()[-1])
    assert set(data["results"]) == {"pp8", "tg2"}
    assert data["tg_bound_tps"] > 0 and data["read_bandwidth_gbs"] > 0
    assert data["tg_bound_pct"] == pytest.approx(100 * data["results"]["tg2"]["mean"] / data["tg_bound_tps"],
                                                 rel=1e-9)


def test_bandwidth_probe_outgrows_the_last_level_cache(tmp_path):
    """The decode bound is a DRAM figure: the probe's buffer must be at least twice the
    largest cache (a Xeon here reports a 480 MiB L3), read from sysfs sizes in their own
    units."""
    for i, (level, size) in enumerate([(1, "48K"), (2, "2048K"), (3, "491520K")]):
        d = tmp_path / f"index{i}"
        d.mkdir()
        (d / "level").write_text(f"{level}\n")
        (d / "size").write_text(f"{size}\n")
    (tmp_path / "uevent").write_text("")
    llc = bench_module._last_level_cache_bytes(str(tmp_path))
    assert llc == 491520 * 1024
    assert bench_module._probe_bytes(llc) >= 2 * llc
    assert bench_module._probe_bytes(llc) % (64 << 20) == 0
    (tmp_path / "index2" / "size").write_text("1G\n")
    assert bench_module._last_level_cache_bytes(str(tmp_path)) == 1 << 30
    assert bench_module._probe_bytes(0) == 256 << 20  # a machine that does not say, or a small cache
    assert bench_module._probe_bytes(8 << 20) == 256 << 20
    assert bench_module._probe_bytes(64 << 30) == 4 << 30  # bounded
    if sys.platform != "darwin":  # macOS asks sysctl instead
        assert bench_module._last_level_cache_bytes(str(tmp_path / "missing")) == 0
