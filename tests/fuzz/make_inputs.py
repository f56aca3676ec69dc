#!/usr/bin/env python3
"""Writes the fuzzers' seed corpus (tests/fuzz/corpus/HARNESS/) and their reproducers of hostile
input (tests/fuzz/regressions/HARNESS/), deterministically, so the committed files can be made
again: `python3 tests/fuzz/make_inputs.py` from the repository root (tools/fuzz.sh does not run
it; the outputs are committed). Seeds come from the shipped samples (traces/samples,
tests/data/two-gpus.pickle, traces/models, traces/baselines, tests/workload/hf) and from small
snapshots pickled here by CPython's own pickler. Nothing from ../shared/traces/real is used.

Reproducers a fuzzer found are added by hand to regressions/HARNESS/ (named crash-* or after what
they do); this script only (re)writes the files it names.
"""
import gzip
import json
import os
import pickle
import shutil

ROOT = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
FUZZ = os.path.join(ROOT, "tests", "fuzz")
HARNESSES = ["pickle", "snapshot", "jsonl", "trace_file", "model", "baseline", "results"]


def write(kind, harness, name, data):
    path = os.path.join(FUZZ, kind, harness, name)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "wb") as f:
        f.write(data if isinstance(data, bytes) else data.encode())


def seed(harness, name, data):
    write("corpus", harness, name, data)


def regression(harness, name, data):
    write("regressions", harness, name, data)


def shipped(path):
    with open(os.path.join(ROOT, path), "rb") as f:
        return f.read()


# ---- snapshots -------------------------------------------------------------------------------
MiB = 1 << 20
BASE = 0x7F3A00000000


def frames(n, shared):
    return [shared[i % len(shared)] for i in range(n)]


def snapshot(entries_per_device=24, devices=1, expandable=False, settings=True, oom=False, cutoff=False):
    """A small torch.cuda.memory._snapshot()-like dict: one 20 MiB large segment per device (and a
    small one), allocs/frees inside them with shared frame dicts (memo references, as PyTorch's
    snapshots have), an empty_cache-like burst at the end."""
    shared = [dict(filename="train.py", line=i, name="f%d" % i) for i in range(5)]
    segments, traces = [], []
    for d in range(devices):
        base = BASE + d * (1 << 36)
        t, trace = 1_700_000_000_000_000, []
        def entry(action, addr, size, stream=0, nframes=4):
            nonlocal t
            t += 1
            trace.append(dict(action=action, addr=addr, size=size, stream=stream, time_us=t,
                              frames=frames(nframes, shared)))
        entry("segment_map" if expandable else "segment_alloc", base, 20 * MiB)
        live = []
        for i in range(entries_per_device // 3):
            addr, size = base + i * MiB, 512 * 1024 + i * 512
            entry("alloc", addr, size, nframes=4 + i % 3)
            live.append((addr, size))
            if i % 2:
                a, s = live.pop(0)
                entry("free_requested", a, s)
                entry("free_completed", a, s)
        if oom:
            trace.append(dict(action="oom", addr=0, size=1 << 40, stream=0, time_us=t + 1, frames=[],
                              device_free=30 * MiB))
        blocks, at = [], base
        for a, s in live:
            blocks.append(dict(address=a, size=a - at + s if a == at else s, requested_size=s,
                               state="active_allocated", frames=[]))
            at = a + s
        used = sum(b["size"] for b in blocks)
        blocks.append(dict(address=BASE + d * (1 << 36) + used, size=20 * MiB - used, requested_size=0,
                           state="inactive", frames=[]))
        segments.append(dict(device=d, address=base, total_size=20 * MiB, allocated_size=used,
                             active_size=used, requested_size=used, stream=0, segment_type="large",
                             segment_pool_id=(0, 0), is_expandable=expandable, frames=[],
                             blocks=[] if cutoff is None else blocks))
        if cutoff:
            trace = trace[len(trace) // 2:]
        traces.append(trace)
    snap = dict(segments=segments, device_traces=traces)
    if settings:
        snap["allocator_settings"] = dict(PYTORCH_CUDA_ALLOC_CONF="max_split_size_mb:64",
                                          max_split_size=64 * MiB, garbage_collection_threshold=0.0,
                                          expandable_segments=expandable,
                                          roundup_power2_divisions={"1": 0, "2": 0})
    return snap


def snapshot_layouts():
    """Layouts snapshot() does not make: 1.13/2.0-era blocks (no 'address', 'history' instead of
    'requested_size', a bare list of segments), pending frees, and the segment_free /
    segment_unmap bursts an empty_cache() leaves, which the reader undoes."""
    t = [1_700_000_000_000_000]
    shared = [dict(filename="model.py", line=i, name="g%d" % i) for i in range(4)]

    def e(action, addr, size, **extra):
        t[0] += 1
        return dict(action=action, addr=addr, size=size, stream=0, time_us=t[0], frames=frames(4, shared), **extra)

    def hist(size):
        return [dict(addr=0, real_size=size, frames=[])]
    old_blocks = [dict(size=2 * MiB, state="active_allocated", history=hist(MiB + 7)),
                  dict(size=2 * MiB, state="active_pending_free", history=hist(2 * MiB)),
                  dict(size=16 * MiB, state="inactive", history=[])]
    old_segment = dict(device=0, address=BASE, total_size=20 * MiB, allocated_size=4 * MiB, active_size=4 * MiB,
                       stream=0, segment_type="large", blocks=old_blocks)
    small = dict(device=0, address=BASE + (1 << 32), total_size=2 * MiB, allocated_size=0, active_size=0,
                 requested_size=0, stream=0, segment_type="small", is_expandable=False, frames=[],
                 blocks=[dict(address=BASE + (1 << 32), size=2 * MiB, requested_size=0, state="inactive", frames=[])])
    # A run that ends in empty_cache(): everything freed, then the cached segments released.
    burst = [e("segment_alloc", BASE + (2 << 32), 20 * MiB), e("alloc", BASE + (2 << 32), 3 * MiB),
             e("segment_alloc", BASE + (3 << 32), 2 * MiB), e("alloc", BASE + (3 << 32), 4096),
             e("free_requested", BASE + (2 << 32), 3 * MiB), e("free_completed", BASE + (2 << 32), 3 * MiB),
             e("free_requested", BASE + (3 << 32), 4096), e("free_completed", BASE + (3 << 32), 4096),
             e("segment_free", BASE + (2 << 32), 20 * MiB), e("segment_free", BASE + (3 << 32), 2 * MiB),
             e("alloc", BASE + (1 << 32), 512), e("free_requested", BASE + (1 << 32), 512),
             e("free_completed", BASE + (1 << 32), 512)]
    # Expandable: mapped, used, partly unmapped.
    x = BASE + (4 << 32)
    mapped = [e("segment_map", x, 40 * MiB), e("alloc", x, 30 * MiB), e("free_requested", x, 30 * MiB),
              e("free_completed", x, 30 * MiB), e("segment_unmap", x + 20 * MiB, 20 * MiB)]
    expandable = dict(device=0, address=x, total_size=20 * MiB, allocated_size=0, active_size=0, requested_size=0,
                      stream=0, segment_type="large", is_expandable=True, frames=[],
                      blocks=[dict(address=x, size=20 * MiB, requested_size=0, state="inactive", frames=[])])
    settings = dict(PYTORCH_CUDA_ALLOC_CONF="expandable_segments:True", expandable_segments=True,
                    max_split_size=-1, garbage_collection_threshold=0.6, large_segment_size=20 * MiB,
                    max_non_split_rounding=64 * MiB)
    return {
        "legacy-segments-list": [old_segment],
        "legacy-history": dict(segments=[old_segment, small], device_traces=[[]]),
        "empty-cache-burst": dict(segments=[small], device_traces=[burst]),
        "expandable-unmap": dict(segments=[expandable], device_traces=[mapped], allocator_settings=settings),
    }


def plain_values():
    """Every kind the restricted machine reads, shared and nested, for the pickle harness."""
    shared = [1, "two", 3.0]
    return {"ints": [0, 1, -1, 255, 256, 65535, 65536, -2**31, 2**31, 2**63 - 1, -2**63, 2**63, 2**64 - 1],
            "floats": [0.0, -1.5, 1e300, float("inf")], "str": ["", "a", "é€😀", "x" * 300],
            "bytes": [b"", b"\x00\xff", bytearray(b"ba")], "none": None, "bools": (True, False),
            "tuples": [(), (1,), (1, 2), (1, 2, 3), (1, 2, 3, 4)], "shared": [shared, shared, {"s": shared}],
            "nested": [[[[[]]]], {"k": {"k": {}}}], 7: "int key", ("t", 1): "tuple key"}


def make_pickles():
    two_gpus = shipped("tests/data/two-gpus.pickle")
    for h in ("pickle", "snapshot", "trace_file"):
        seed(h, "two-gpus.pickle", two_gpus)
    variants = {
        "small": snapshot(),
        "expandable": snapshot(expandable=True),
        "oom-nosettings": snapshot(oom=True, settings=False),
        "cutoff": snapshot(cutoff=True),
        "two-devices": snapshot(devices=2, entries_per_device=9),
    }
    for name, snap in variants.items():
        for proto in (2, 4):
            data = pickle.dumps(snap, protocol=proto)
            seed("snapshot", "%s-p%d.pickle" % (name, proto), data)
            if name in ("small", "cutoff"):
                seed("pickle", "%s-p%d.pickle" % (name, proto), data)
    seed("snapshot", "segments-list-p2.pickle", pickle.dumps(snapshot()["segments"], protocol=2))
    for name, snap in snapshot_layouts().items():
        seed("snapshot", "%s-p4.pickle" % name, pickle.dumps(snap, protocol=4))
    seed("trace_file", "small-p4.pickle", pickle.dumps(variants["small"], protocol=4))
    for proto in range(0, 6):
        seed("pickle", "values-p%d.pickle" % proto, pickle.dumps(plain_values(), protocol=proto))
    refused = b"\x80\x04\x95\x15\x00\x00\x00\x00\x00\x00\x00\x8c\x08builtins\x8c\x04eval\x93."
    seed("pickle", "refused-global.pickle", refused)

    # Hostile: every segment's `blocks` is one list of 1000 inactive blocks, by memo reference
    # (shared-reference amplification: 300 x 1000 blocks read from a file of a few KB).
    snap = snapshot(entries_per_device=6)
    one = snap["segments"][0]
    blocks = [dict(address=BASE + i * 512, size=512, requested_size=0, state="inactive", frames=[])
              for i in range(1000)]
    snap["segments"] = [dict(one, address=BASE + (i + 1) * (1 << 30), blocks=blocks) for i in range(300)]
    snap["device_traces"] = [[]]  # state only: every segment is read
    data = pickle.dumps(snap, protocol=4)
    regression("snapshot", "shared-blocks-300-segments.pickle", data)
    regression("pickle", "shared-blocks-300-segments.pickle", data)
    # Hostile: many devices, one segment each.
    many = snapshot(entries_per_device=3)
    seg = many["segments"][0]
    many["segments"] = [dict(seg, device=d, blocks=[]) for d in range(512)]
    many["device_traces"] = [[] for _ in range(512)]
    regression("snapshot", "512-devices.pickle", pickle.dumps(many, protocol=4))


# ---- JSONL traces --------------------------------------------------------------------------------
def make_jsonl():
    samples = os.path.join(ROOT, "traces", "samples")
    for name in sorted(os.listdir(samples)):
        if name.endswith(".jsonl"):
            data = shipped(os.path.join("traces", "samples", name))
            seed("jsonl", name, data)
            seed("trace_file", name, data)
    seed("trace_file", "cutoff.jsonl.gz", gzip.compress(shipped("traces/samples/cutoff.jsonl"), mtime=0))

    # Hostile: alloc ids that are multiples of the inverse of the Fibonacci hashing multiplier, so
    # id * 0x9E3779B97F4A7C15 (mod 2^64) is 1, 2, 3, ...: every id in one bucket of a table hashed
    # by the multiplier's top bits (hash flooding).
    mul = 0x9E3779B97F4A7C15
    inv = pow(mul, -1, 1 << 64)
    lines = ['{"fraglab_trace":1,"name":"fib-ids","source":"make_inputs.py"}']
    ids = [(k * inv) % (1 << 64) for k in range(1, 601)]
    for i in ids:
        lines.append('{"op":"alloc","id":%d,"size":512}' % i)
    for i in ids:
        lines.append('{"op":"free","id":%d}' % i)
    text = "\n".join(lines) + "\n"
    regression("jsonl", "fibonacci-inverse-ids.jsonl", text)
    regression("trace_file", "fibonacci-inverse-ids.jsonl", text)

    # Hostile: a gzip bomb made of concatenated members (each 4 MiB of one byte), 64 MiB in all.
    member = gzip.compress(b"\n" * (4 * MiB), compresslevel=9, mtime=0)
    regression("trace_file", "gzip-bomb-16-members.gz", member * 16)


# ---- model JSON ----------------------------------------------------------------------------------
def make_models():
    models = os.path.join(ROOT, "traces", "models")
    for name in sorted(os.listdir(models)):
        seed("model", name, shipped(os.path.join("traces", "models", name)))
    hf = os.path.join(ROOT, "tests", "workload", "hf")
    for name in sorted(os.listdir(hf)):
        seed("model", "hf-%s.json" % name, shipped(os.path.join("tests", "workload", "hf", name, "config.json")))
    # Hostile: a hidden size of 1e12, in both formats.
    gpt2 = json.loads(shipped("tests/workload/hf/gpt2-xl/config.json"))
    gpt2["n_embd"] = 10**12
    regression("model", "hf-hidden-1e12.json", json.dumps(gpt2, indent=1))
    own = json.loads(shipped("traces/models/llama2-7b.json"))
    own["hidden"] = 10**12
    own["head_dim"] = 10**12 // own["heads"]
    regression("model", "own-hidden-1e12.json", json.dumps(own, indent=1))


# ---- baselines and results files -----------------------------------------------------------------
# Written by `fraglab sweep` (today's format: device_time_s, stall_time_s and the cost model in the
# first line), from the repository root:
#   fraglab sweep traces/samples/streams.jsonl traces/samples/cutoff.jsonl -p pytorch \
#       --grid max_split_size_mb=none,64 --shard 1/2 -o shard-1-of-2.csv
#   fraglab sweep traces/samples/streams.jsonl -p pytorch --grid roundup_power2_divisions=none,4 -o whole.jsonl
RESULTS_CSV = """\
# {"fraglab_sweep":1,"shard":"1/2","policy":"pytorch","grid":["max_split_size_mb=none,64"],"device":"sim","traces":[{"name":"streams","events":48,"request_hash":"fnv1a64:e67b87744b3afc10"},{"name":"cutoff","events":12,"request_hash":"fnv1a64:57aee1ac058b4730"}],"start_state":"auto","cost_model":{"source":"fraglab defaults (src/device/cost_model.cpp)","digest":"fnv1a64:3b05a65b658a308f"},"contexts":[{"trace":"cutoff","start_state":"cold","recorded_settings":"pytorch:max_split_size_mb:128,garbage_collection_threshold:0.8","recorded_run":{"trace":"cutoff","device":"sim:264241152B","spec":"pytorch:max_split_size_mb:128,garbage_collection_threshold:0.8","knobs":{"max_split_size_mb":null},"peak_reserved_bytes":150994944,"peak_allocated_bytes":92278784,"peak_requested_bytes":92278688,"fragmentation_at_peak":0.3888617621527778,"peak_utilization":0.6111382378472222,"num_alloc_retries":0,"num_ooms":0,"num_device_alloc":2,"num_device_free":2,"device_time_s":3.5e-05,"stall_time_s":2.1e-05}}]}
trace,device,spec,max_split_size_mb,peak_reserved_bytes,peak_allocated_bytes,peak_requested_bytes,fragmentation_at_peak,peak_utilization,num_alloc_retries,num_ooms,num_device_alloc,num_device_free,device_time_s,stall_time_s
cutoff,sim:264241152B,pytorch:max_split_size_mb:64,64,150994944,92278784,92278688,0.3888617621527778,0.6111382378472222,0,0,2,2,3.5e-05,2.1e-05
streams,sim,pytorch:max_split_size_mb:64,64,127926272,52441600,77611520,0.5900638767930328,0.4099361232069672,0,0,4,0,2.8e-05,0
"""
RESULTS_JSONL = """\
{"fraglab_sweep":1,"shard":"0/1","policy":"pytorch","grid":["roundup_power2_divisions=none,4"],"device":"sim","traces":[{"name":"streams","events":48,"request_hash":"fnv1a64:e67b87744b3afc10"}],"start_state":"auto","cost_model":{"source":"fraglab defaults (src/device/cost_model.cpp)","digest":"fnv1a64:3b05a65b658a308f"}}
{"trace":"streams","device":"sim","spec":"pytorch","knobs":{"roundup_power2_divisions":null},"peak_reserved_bytes":127926272,"peak_allocated_bytes":52441600,"peak_requested_bytes":77611520,"fragmentation_at_peak":0.5900638767930328,"peak_utilization":0.4099361232069672,"num_alloc_retries":0,"num_ooms":0,"num_device_alloc":4,"num_device_free":0,"device_time_s":2.8e-05,"stall_time_s":0.0}
{"trace":"streams","device":"sim","spec":"pytorch:roundup_power2_divisions:4","knobs":{"roundup_power2_divisions":"4"},"peak_reserved_bytes":138412032,"peak_allocated_bytes":60030976,"peak_requested_bytes":77611520,"fragmentation_at_peak":0.5662878787878788,"peak_utilization":0.4337121212121212,"num_alloc_retries":0,"num_ooms":0,"num_device_alloc":4,"num_device_free":0,"device_time_s":2.8e-05,"stall_time_s":0.0}
"""


def make_results():
    seed("results", "shard-1-of-2.csv", RESULTS_CSV)
    seed("results", "whole.jsonl", RESULTS_JSONL)
    seed("results", "no-meta.csv", "\n".join(RESULTS_CSV.splitlines()[1:]) + "\n")
    # The format before device_time_s: the same rows without its two columns (read as an error
    # saying the file must be re-run, src/sweep/results_format.cpp).
    older = [RESULTS_CSV.splitlines()[1].replace(",device_time_s,stall_time_s", "")]
    older += [line.rsplit(",", 2)[0] for line in RESULTS_CSV.splitlines()[2:]]
    seed("results", "older-format.csv", "\n".join(older) + "\n")
    # Hostile: malformed lines merge must refuse in one message.
    header = RESULTS_CSV.splitlines()[1]
    row = RESULTS_CSV.splitlines()[2]
    regression("results", "csv-short-row.csv", header + "\n" + row.rsplit(",", 3)[0] + "\n")
    regression("results", "csv-unterminated-quote.csv", header + '\n"cutoff,sim,' + row.split(",", 2)[2] + "\n")
    regression("results", "csv-huge-count.csv", header + "\n" + row.replace(",0,0,2,2", ",18446744073709551616,-1,2,2") + "\n")
    jl = RESULTS_JSONL.splitlines()
    regression("results", "jsonl-bad-numbers.jsonl", jl[0] + "\n" + jl[1].replace("127926272", "1e400").replace(
        '"num_ooms":0', '"num_ooms":-1') + "\n")
    regression("results", "jsonl-not-an-object.jsonl", jl[0] + "\n[1,2,3]\n" + jl[1][:40] + "\n")
    # Found by the results fuzzer: a shard count of 333333333 made merge's check list every
    # missing shard (src/sweep/shards.cpp).
    regression("results", "shard-0-of-333333333.jsonl", jl[0].replace('"0/1"', '"0/333333333"') + "\n" + jl[1] + "\n")
    # Found by the results fuzzer: a grid of 4 axes x 40 values in the metadata, 2.56 million
    # settings, which merge's check expanded in full (out of memory); now streamed one at a time.
    axes = ["max_split_size_mb", "roundup_power2_divisions", "garbage_collection_threshold", "max_non_split_rounding_mb"]
    values = ",".join(str(v) for v in range(2, 42))
    meta = json.loads(jl[0])
    meta["grid"] = ["%s=%s" % (a, values) for a in axes]
    regression("results", "grid-of-2560000-settings.jsonl", json.dumps(meta, separators=(",", ":")) + "\n")
    regression("results", "meta-bad-shard.jsonl", jl[0].replace('"0/1"', '"5/0"') + "\n" + jl[1] + "\n")


def make_baselines():
    baselines = os.path.join(ROOT, "traces", "baselines")
    for name in sorted(os.listdir(baselines)):
        if name.endswith(".json"):
            seed("baseline", name, shipped(os.path.join("traces", "baselines", name)))
    # Hostile: byte values of 2^64 and -1.
    base = json.loads(shipped("traces/baselines/streams.json"))
    base["device"]["capacity_bytes"] = 2**64
    base["device"]["external_bytes"] = -1
    for run in base["runs"]:
        for key in list(run):
            if key.endswith("_bytes") or key.startswith("peak_reserved"):
                run[key] = 2**64 if len(run["policy"]) % 2 else -1
    regression("baseline", "bytes-2pow64-and-minus-1.json", json.dumps(base, indent=1))
    # A run that is not an object, and a policy that is not a string.
    regression("baseline", "run-not-an-object.json", json.dumps({"runs": [1, {"policy": 7}]}))


# ---- dictionaries (libFuzzer -dict): the tokens each reader looks for ----------------------------
SNAPSHOT_KEYS = """action active_allocated active_awaiting_free active_pending_free addr address alloc
allocator_settings annotate blocks device device_free device_traces expandable_segments free_completed
free_requested garbage_collection_threshold history inactive is_expandable large large_segment_size
max_non_split_rounding max_split_size oom real_size requested_size segment_alloc segment_free segment_map
segment_type segment_unmap segments size small snapshot state stream time_us total_size touched user_defined
frames PYTORCH_CUDA_ALLOC_CONF roundup_power2_divisions""".split()
JSONL_KEYS = """addr alloc allocator_conf block_size device device_free expandable fraglab_trace free free_requested
free_completed id initial_allocations initial_segments label large mark name oom op pool size small source
source_entries stream strings t tag value empty_cache segment_alloc segment_free segment_map segment_unmap
inferred""".split()
MODEL_KEYS = """_name_or_path architectures attention_bias d_ff d_kv d_model feed_forward_proj head_dim hidden_size
intermediate_size llama max_position_embeddings mlp_bias model_type n_ctx n_embd n_head n_inner n_layer
n_positions num_attention_heads num_decoder_layers num_heads num_hidden_layers num_key_value_heads num_layers
relative_attention_num_buckets relu tie_word_embeddings vocab_size GPT2LMHeadModel LlamaForCausalLM
T5ForConditionalGeneration gpt2 t5 name family layers encoder_layers decoder_layers hidden heads kv_heads ffn
vocab max_positions tied_embeddings relative_attention_buckets""".split()
RESULTS_KEYS = """contexts device events fraglab_sweep fragmentation_at_peak grid knobs name none num_alloc_retries
num_device_alloc num_device_free num_ooms peak_allocated_bytes peak_requested_bytes peak_reserved_bytes
peak_utilization policy recorded recorded_run recorded_settings request_hash shard spec start_state trace
traces cold auto sim device_time_s stall_time_s cost_model source digest""".split()
BASELINE_KEYS = """capacity_bytes device events external_bytes fragmentation_at_peak name num_alloc_retries
num_device_alloc num_device_free num_ooms peak_allocated_bytes peak_requested_bytes peak_reserved_bytes
peak_utilization policy request_hash runs trace kind sim capacity_source start_state pytorch""".split()


def dict_line(token):
    return '"%s"' % "".join(c if 32 <= ord(c) < 127 and c not in '"\\' else "\\x%02x" % ord(c) for c in token)


def pickle_tokens():
    # Every opcode byte the machine reads or refuses, and the protocol headers.
    ops = bytes(range(0x28, 0x7f)) + bytes(range(0x80, 0x98))
    tokens = [chr(b) for b in ops] + ["\x80\x02", "\x80\x04", "\x80\x05", "\x95\x00\x00\x00\x00\x00\x00\x00\x00"]
    return tokens


def make_dictionaries():
    def write_dict(name, tokens):
        path = os.path.join(FUZZ, "dictionaries", name + ".dict")
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "w") as f:
            f.write("# libFuzzer dictionary for tests/fuzz/%s_fuzz.cpp, written by make_inputs.py\n" % name)
            for t in tokens:
                f.write(dict_line(t) + "\n")
    snap = pickle_tokens() + ["\x8c" + chr(len(k)) + k for k in SNAPSHOT_KEYS]
    write_dict("pickle", snap)
    write_dict("snapshot", snap)
    jsonl = ['"%s"' % k for k in JSONL_KEYS] + ["{", "}", "[", "]", ":", ",", "\n", "18446744073709551615", "-1"]
    write_dict("jsonl", jsonl)
    write_dict("trace_file", jsonl + ["\x1f\x8b\x08\x00", "\x80\x04"])
    write_dict("model", ['"%s"' % k for k in MODEL_KEYS] + ["1e12", "18446744073709551616", "-1", "null"])
    write_dict("baseline", ['"%s"' % k for k in BASELINE_KEYS] + ["1e400", "18446744073709551616", "-1", "null"])
    write_dict("results", ['"%s"' % k for k in RESULTS_KEYS] + RESULTS_KEYS + ["# ", "\r\n", "1e400", "-1"])


def main():
    for kind in ("corpus", "regressions"):
        for h in HARNESSES:
            os.makedirs(os.path.join(FUZZ, kind, h), exist_ok=True)
    make_pickles()
    make_jsonl()
    make_models()
    make_results()
    make_baselines()
    make_dictionaries()


if __name__ == "__main__":
    main()
