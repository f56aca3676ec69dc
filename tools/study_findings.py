#!/usr/bin/env python3
"""Where growth over steps could come from: the study's runs with each growth mechanism on.

Generates the T5-3B and GPT2-XL runs of docs/workloads.md ("The talk's observations") with
`fraglab gen`, once with today's defaults and once per mechanism (one at a time, then all
together), replays each through `pytorch` and `pytorch:expandable_segments:True` on
--device sim:80GiB, and rewrites the section of docs/workloads.md between the marker comments
with two tables: the measured findings per mechanism, and "What the model reproduces", whose
verdicts are computed from the measured numbers with the thresholds stated in the text.

    tools/study_findings.py [--fraglab build/fraglab] [--steps 50] [--jobs 2] [--doc docs/workloads.md]
                            [--workdir DIR] [--no-write]

Not run by CI (5 min 41 s with --jobs 2 on two cores shared with other builds). Needs only python3
and a built fraglab. With --workdir the measurements are kept in WORKDIR/results.json, and
--results FILE rewrites the section from them without running anything.
"""

import argparse
import concurrent.futures
import csv
import json
import os
import shutil
import subprocess
import sys
import tempfile

BEGIN = "<!-- study_findings.py: begin (generated; do not edit by hand) -->"
END = "<!-- study_findings.py: end -->"
GIB = 2**30
CAPACITY = "80GiB"
CAPACITY_BYTES = 80 * GIB
POLICIES = [("default", "pytorch"), ("expandable", "pytorch:expandable_segments:True")]
T5_BATCHES = [8, 16, 32, 64, 69]
GPT2_BATCHES = [8, 16, 32]
CUBLAS_A100 = 2 * 4096 * 1024 + 8 * 16 * 1024  # PyTorch's ":4096:2:16:8" (CUDABlasHandlePool.cpp)
NCCL_EXTERNAL = "1GiB"  # memory outside the caching allocator (CUDA context + NCCL buffers), from step 0

# Thresholds of the verdicts (stated in the generated text).
GROWTH_GIB = 0.5  # reserved after step 50 minus after step 2, default policy
PINNED_FRACTION = 0.95  # peak reserved at least this share of the 80 GiB
MANY_RETRIES = 10
LESS_PRONE_POINTS = 5.0  # GPT2-XL's overhead (reserved over requested, %) below T5-3B's by this much


def gen_base(model, batch, steps, extra):
    args = ["--model", model, "--framework", "zero3", "--world-size", "2", "--steps", str(steps), "--ds-hf-auto",
            "--recompute-impl", "reentrant", "--micro-batch", str(batch)]
    if model == "t5-3b" and "--padding" not in extra:
        args += ["--padding", "longest"]
    return args + extra


def partial_batch_dataset(batch):
    # Epochs of 10 full batches and a last one of about a third (per rank), so that epochs end at
    # steps 11, 22, 33, 44 of the 50 (a real data set has far longer epochs: this shows the
    # mechanism's effect, not its frequency).
    per_rank = 10 * batch + max(1, batch // 3)
    return 2 * per_rank


# name, what it changes (for the text), gen arguments (per batch), device extra, models it applies to
MECHANISMS = [
    ("baseline", "today's defaults (docs/workloads.md \"Settings\"): the main runs", lambda b: [], "",
     ("t5-3b", "gpt2-xl")),
    ("sources", "`--len-median 256`: T5 sources vary below the 512 truncation (median 256, sigma 0.5; GPT2-XL's group_texts blocks are always 1024 tokens)",
     lambda b: ["--len-median", "256"], "", ("t5-3b",)),
    ("partial", "`--dataset-size 2*(10B+B/3)`: every 11th batch holds about B/3 examples",
     lambda b: ["--dataset-size", str(partial_batch_dataset(b))], "", ("t5-3b", "gpt2-xl")),
    ("eval", "`--eval-every 10 --eval-batches 5`: five forward-only batches after steps 10, 20, ..., 50",
     lambda b: ["--eval-every", "10", "--eval-batches", "5"], "", ("t5-3b", "gpt2-xl")),
    ("timing", "`--side-delay-us 1000`: each step every side stream's kernels wait up to 1 ms more",
     lambda b: ["--side-delay-us", "1000"], "", ("t5-3b", "gpt2-xl")),
    ("cublas", f"`--cublas-workspace {CUBLAS_A100}`: two cuBLAS workspaces kept from step 1",
     lambda b: ["--cublas-workspace", str(CUBLAS_A100)], "", ("t5-3b", "gpt2-xl")),
    ("nccl", f"`--device sim:{CAPACITY},external:{NCCL_EXTERNAL}`: memory outside the allocator from the start",
     lambda b: [], f",external:{NCCL_EXTERNAL}", ("t5-3b", "gpt2-xl")),
    ("all", "every mechanism above at once (sources for T5 only)", None, f",external:{NCCL_EXTERNAL}",
     ("t5-3b", "gpt2-xl")),
    # Not a mechanism: the workload model's own explanation of finding (2) (wm §8), for comparison.
    ("fp32-512", "not a growth mechanism: the workload model's alternative hypothesis for finding (2), "
     "`--precision fp32 --tgt-len 512 --padding max_length` (fixed 512/512, fp32 compute; wm §8)",
     lambda b: ["--precision", "fp32", "--tgt-len", "512", "--padding", "max_length"], "", ("t5-3b",)),
]
GROWTH = [m[0] for m in MECHANISMS if m[0] not in ("baseline", "all", "fp32-512")]


def all_args(model, batch):
    args = []
    for name, _, fn, _, models in MECHANISMS:
        if name in GROWTH and fn is not None and model in models:
            args += fn(batch)
    return args


def run(cmd):
    p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    if p.returncode != 0:
        sys.exit(f"study_findings.py: {' '.join(cmd)} failed ({p.returncode}): {p.stderr.strip()}")
    return p


def reserved_after_steps(timeline, steps):
    """Reserved bytes after each step, per policy, from a --timeline CSV (segment changes are always
    rows; `step` is the step the row belongs to)."""
    last = {}  # policy -> {step: reserved}
    with open(timeline, newline="") as f:
        for row in csv.DictReader(f):
            if row["step"] == "":
                continue
            last.setdefault(row["policy"], {})[int(row["step"])] = int(row["reserved_bytes"])
    out = {}
    for policy, by_step in last.items():
        r, seen = 0, []
        for s in range(1, steps + 1):
            r = by_step.get(s, r)
            seen.append(r)
        out[policy] = seen
    return out


def replay(fraglab, trace, device_extra, tag, workdir, steps):
    result, timeline = os.path.join(workdir, tag + ".json"), os.path.join(workdir, tag + ".csv")
    cmd = [fraglab, "-q", "replay", trace, "--device", f"sim:{CAPACITY}{device_extra}", "--json", result,
           "--timeline", timeline, "--timeline-every", "1000000000"]
    for _, spec in POLICIES:
        cmd += ["-p", spec]
    run(cmd)
    with open(result) as f:
        runs = {r["policy"]: r for r in json.load(f)["runs"]}
    per_step = reserved_after_steps(timeline, steps)
    os.remove(timeline)
    os.remove(result)
    out = {}
    for label, spec in POLICIES:
        r = runs[spec]
        out[label] = {
            "peak_requested": r["peak_requested_bytes"],
            "peak_reserved": r["peak_reserved_bytes"],
            "retries": r["num_alloc_retries"],
            "ooms": r["num_ooms"],
            "reserved": per_step.get(spec, [0] * steps),
        }
    return out


def one_run(fraglab, workdir, model, batch, mechanism, steps):
    """Generates one trace and replays it; "baseline" is also replayed with the "nccl" device (the
    same trace: only the device differs). Returns {(model, batch, mechanism): results}."""
    name, _, fn, device_extra, _ = mechanism
    tag = f"{model}-b{batch}-{name}"
    trace = os.path.join(workdir, tag + ".jsonl")
    extra = all_args(model, batch) if fn is None else fn(batch)
    run([fraglab, "-q", "gen"] + gen_base(model, batch, steps, extra) + ["-o", trace, "--overwrite"])
    out = {(model, batch, name): replay(fraglab, trace, device_extra, tag, workdir, steps)}
    if name == "baseline":
        nccl = next(m for m in MECHANISMS if m[0] == "nccl")
        out[(model, batch, "nccl")] = replay(fraglab, trace, nccl[3], tag + "-nccl", workdir, steps)
    os.remove(trace)
    return out


def gib(b):
    return f"{b / GIB:.1f}"


def at(res, step):
    return res["reserved"][min(step, len(res["reserved"])) - 1]


def growth(res, steps):
    return (at(res, steps) - at(res, 2)) / GIB


def overhead(res):
    return 100.0 * (res["peak_reserved"] / res["peak_requested"] - 1.0)


def findings_table(results, steps):
    mid = min(10, steps)
    lines = [
        f"| run | mechanism | peak requested | default: reserved after step 2 → {mid} → {steps} | retries | OOMs "
        f"| expandable: reserved after step 2 → {mid} → {steps} | retries | OOMs |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for model, batches in (("t5-3b", T5_BATCHES), ("gpt2-xl", GPT2_BATCHES)):
        for b in batches:
            for m in MECHANISMS:
                key = (model, b, m[0])
                if key not in results:
                    continue
                d, e = results[key]["default"], results[key]["expandable"]
                label = ("T5-3B" if model == "t5-3b" else "GPT2-XL") + f" b={b}"
                lines.append(
                    f"| {label} | {m[0]} | {gib(d['peak_requested'])} "
                    f"| {gib(at(d, 2))} → {gib(at(d, mid))} → {gib(at(d, steps))} | {d['retries']} | {d['ooms']} "
                    f"| {gib(at(e, 2))} → {gib(at(e, mid))} → {gib(at(e, steps))} | {e['retries']} | {e['ooms']} |")
    return lines


def verdicts(results, steps):
    """One row per finding: for each mechanism whether the measured numbers meet the finding's
    threshold, with the numbers that decide it."""
    names = [m[0] for m in MECHANISMS]
    rows = []

    def t5(b, m, policy="default"):
        return results.get(("t5-3b", b, m), {}).get(policy)

    def gpt2(b, m, policy="default"):
        return results.get(("gpt2-xl", b, m), {}).get(policy)

    # (1) growth after step 2 at b = 8/16/32
    cells = {}
    for m in names:
        g = [growth(t5(b, m), steps) for b in (8, 16, 32) if t5(b, m)]
        if not g:
            continue
        grown = sum(1 for x in g if x >= GROWTH_GIB)
        cells[m] = (grown >= 2, "+" + "/".join(f"{x:.1f}" for x in g) + " GiB")
    rows.append(("(1) T5-3B reserved grows over the steps at b = 8/16/32",
                 f"default policy, reserved after step {steps} minus after step 2 ≥ {GROWTH_GIB} GiB at two of the "
                 "three batch sizes", cells))
    # (2) pinned near the maximum with many retries at 64/69
    cells = {}
    for m in names:
        rs = [t5(b, m) for b in (64, 69) if t5(b, m)]
        if len(rs) < 2:
            continue
        ok = all(r["peak_reserved"] >= PINNED_FRACTION * CAPACITY_BYTES and r["retries"] >= MANY_RETRIES for r in rs)
        cells[m] = (ok, "/".join(f"{gib(r['peak_reserved'])} GiB, {r['retries']} retries, {r['ooms']} OOMs"
                                 for r in rs))
    rows.append(("(2) T5-3B pinned at the maximum with many retries at b = 64/69",
                 f"default policy, peak reserved ≥ {PINNED_FRACTION:.0%} of {CAPACITY} and ≥ {MANY_RETRIES} "
                 "retries at both", cells))
    # (3) expandable segments help below the maximum
    cells = {}
    for m in names:
        pairs = [(t5(b, m), t5(b, m, "expandable")) for b in T5_BATCHES if t5(b, m)]
        if not pairs:
            continue
        gains = [(d["peak_reserved"] - e["peak_reserved"]) / GIB for d, e in pairs]
        ok = all(x > 0 for x in gains)
        cells[m] = (ok, f"{min(gains):.1f} to {max(gains):.1f} GiB less")
    rows.append(("(3) expandable segments help below the maximum",
                 "expandable_segments:True reserves less at its peak than the default at every T5-3B batch size",
                 cells))
    # (4) GPT2-XL less prone to fragmentation than T5-3B
    cells = {}
    for m in names:
        g = [overhead(gpt2(b, m)) for b in GPT2_BATCHES if gpt2(b, m)]
        t = [overhead(t5(b, m)) for b in GPT2_BATCHES if t5(b, m)]
        if not g or not t:
            continue
        mg, mt = sum(g) / len(g), sum(t) / len(t)
        cells[m] = (mg <= mt - LESS_PRONE_POINTS, f"+{mg:.0f} % vs +{mt:.0f} %")
    rows.append(("(4) GPT2-XL less prone to fragmentation than T5-3B",
                 "mean overhead of peak reserved over peak requested at b = 8/16/32 (default policy), GPT2-XL below "
                 f"T5-3B's by ≥ {LESS_PRONE_POINTS:.0f} points", cells))
    return rows


def reproduces_table(rows):
    names = [m[0] for m in MECHANISMS]
    lines = ["| finding | test | " + " | ".join(names) + " |", "|---|---|" + "---|" * len(names)]
    for finding, test, cells in rows:
        out = []
        for m in names:
            if m not in cells:
                out.append("n/a")
            else:
                ok, why = cells[m]
                out.append(("**yes**" if ok else "no") + f" ({why})")
        lines.append(f"| {finding} | {test} | " + " | ".join(out) + " |")
    return lines


def summary(rows):
    lines = []
    for finding, _, cells in rows:
        yes = [m for m, (ok, _) in cells.items() if ok]
        no = [m for m, (ok, _) in cells.items() if not ok]
        if not yes:
            lines.append(f"* {finding}: reproduced by none of the runs ({', '.join(no)}).")
        elif not no:
            lines.append(f"* {finding}: reproduced by every run, the baseline included: no mechanism is needed.")
        elif "baseline" in yes:
            lines.append(f"* {finding}: reproduced by the baseline and by {', '.join(m for m in yes if m != 'baseline')}; "
                         f"lost with {', '.join(no)}.")
        else:
            lines.append(f"* {finding}: not by the baseline; reproduced with {', '.join(yes)}; not with {', '.join(no)}.")
    return lines


def growth_list(results, steps):
    """Every run whose reserved memory grows after step 2 by the threshold of finding (1)."""
    lines = []
    for model, batches in (("t5-3b", T5_BATCHES), ("gpt2-xl", GPT2_BATCHES)):
        for b in batches:
            for m in MECHANISMS:
                for label, _ in POLICIES:
                    r = results.get((model, b, m[0]), {}).get(label)
                    if r is None or growth(r, steps) < GROWTH_GIB:
                        continue
                    last = max(s for s in range(2, steps + 1) if at(r, s) > at(r, s - 1))
                    name = ("T5-3B" if model == "t5-3b" else "GPT2-XL") + f" b={b}"
                    lines.append(f"* {name}, {m[0]}, {label}: {gib(at(r, 2))} → {gib(at(r, steps))} GiB "
                                 f"(+{growth(r, steps):.1f}), last growth at step {last}.")
    if not lines:
        lines.append("* none.")
    return lines


def section(results, steps, command):
    lines = [BEGIN, "", f"Generated by `{command}` (steps = {steps}; ZeRO-3, N = 2, rank 0, seed 0, bf16, reentrant "
             f"recomputation, `--ds-hf-auto`; T5-3B `--padding longest`; replayed on `--device sim:{CAPACITY}`). "
             "Sizes in GiB. Mechanisms, one at a time:", ""]
    for name, what, _, _, models in MECHANISMS:
        only = "" if len(models) == 2 else " (T5-3B only)"
        lines.append(f"* **{name}**: {what}{only}.")
    lines += ["", "#### Findings per mechanism", ""]
    lines += findings_table(results, steps)
    rows = verdicts(results, steps)
    lines += ["", "#### What the model reproduces, per mechanism", "",
              "Each verdict is computed from the table above by the test in its row.", ""]
    lines += reproduces_table(rows)
    lines += [""] + summary(rows)
    lines += ["", f"Runs whose reserved memory grows by ≥ {GROWTH_GIB} GiB after step 2 (either policy):", ""]
    lines += growth_list(results, steps) + ["", END]
    return "\n".join(lines) + "\n"


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--fraglab", default="build/fraglab")
    ap.add_argument("--steps", type=int, default=50)
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--doc", default="docs/workloads.md")
    ap.add_argument("--workdir")
    ap.add_argument("--no-write", action="store_true", help="print the section instead of rewriting --doc")
    ap.add_argument("--results", help="read the measurements from this JSON file (written by an earlier run into "
                    "WORKDIR/results.json) instead of running them")
    a = ap.parse_args()
    if not shutil.which(a.fraglab) and not os.path.exists(a.fraglab):
        sys.exit(f"study_findings.py: --fraglab {a.fraglab}: no such program (build it first)")
    if a.steps < 10:
        sys.exit(f"study_findings.py: --steps {a.steps}: expected at least 10")
    if a.results:
        with open(a.results) as f:
            saved = json.load(f)
        results = {(r["model"], r["batch"], r["mechanism"]): r["runs"] for r in saved}
        write(a, section(results, a.steps, command_of(a)))
        return
    workdir = a.workdir or tempfile.mkdtemp(prefix="study_findings-")
    os.makedirs(workdir, exist_ok=True)
    jobs = []
    for model, batches in (("t5-3b", T5_BATCHES), ("gpt2-xl", GPT2_BATCHES)):
        for b in batches:
            for m in MECHANISMS:
                if model in m[4] and m[0] != "nccl":  # nccl replays the "baseline" trace
                    jobs.append((model, b, m))
    results = {}
    with concurrent.futures.ThreadPoolExecutor(max_workers=a.jobs) as pool:
        futures = [pool.submit(one_run, a.fraglab, workdir, model, b, m, a.steps) for model, b, m in jobs]
        for i, fut in enumerate(concurrent.futures.as_completed(futures), 1):
            for key, value in fut.result().items():
                results[key] = value
                print(f"study_findings.py: {i}/{len(jobs)} {key[0]} b={key[1]} {key[2]}", file=sys.stderr)
    if a.workdir:
        with open(os.path.join(workdir, "results.json"), "w") as f:
            json.dump([{"model": k[0], "batch": k[1], "mechanism": k[2], "runs": v} for k, v in sorted(results.items())],
                      f)
    else:
        shutil.rmtree(workdir, ignore_errors=True)
    write(a, section(results, a.steps, command_of(a)))


def command_of(a):
    return "tools/study_findings.py" + ("" if a.steps == 50 else f" --steps {a.steps}")


def write(a, text):
    if a.no_write:
        sys.stdout.write(text)
        return
    with open(a.doc) as f:
        doc = f.read()
    if BEGIN not in doc or END not in doc:
        sys.exit(f"study_findings.py: {a.doc}: expected the marker comments {BEGIN!r} and {END!r}")
    head, rest = doc.split(BEGIN, 1)
    _, tail = rest.split(END, 1)
    with open(a.doc, "w") as f:
        f.write(head + text.rstrip("\n") + tail)


if __name__ == "__main__":
    main()
