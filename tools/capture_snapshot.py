#!/usr/bin/env python3
"""Record a PyTorch memory snapshot of a few training steps on a GPU, for `fraglab validate`.

Records the caching allocator's history from before the first allocation (so the snapshot starts
from an empty device and has no cut-off start state to infer), with segment events (`enabled="all"`)
and enough entries that none are dropped, then writes the pickle with
torch.cuda.memory._dump_snapshot and prints the fraglab command to check it.

By default it trains a small transformer (a few steps of forward, backward and AdamW); --script
runs your own code instead: a Python file or module and a function in it (`train.py:run_steps` or
`mypkg.train:run_steps`), called with no arguments, that runs a few steps on the current CUDA device.

Needs a CUDA GPU and PyTorch 2.0 or newer. Exit status: 0 written, 2 bad arguments or no GPU.
"""

import argparse
import importlib
import importlib.util
import inspect
import os
import sys

EXIT_USAGE = 2


def fail(message):
    print(f"capture_snapshot.py: {message}", file=sys.stderr)
    sys.exit(EXIT_USAGE)


def parse_args(argv):
    parser = argparse.ArgumentParser(
        prog="capture_snapshot.py",
        description=__doc__.split("\n\n")[0],
        epilog="example: tools/capture_snapshot.py -o step.pickle --steps 3 && build/fraglab validate step.pickle",
    )
    parser.add_argument("-o", "--output", default="snapshot.pickle", help="the snapshot pickle to write (default snapshot.pickle)")
    parser.add_argument("--overwrite", action="store_true", help="replace an existing output file")
    parser.add_argument("--steps", type=int, default=3, help="training steps of the built-in model (default 3)")
    parser.add_argument("--script", metavar="FILE.py:FUNCTION|MODULE:FUNCTION", help="run your own steps instead of the built-in model")
    parser.add_argument(
        "--max-entries",
        type=int,
        default=10_000_000,
        help="history entries kept (default 10,000,000; validate needs every entry since the first allocation)",
    )
    parser.add_argument(
        "--stacks",
        choices=["python", "all", "none"],
        default="python",
        help="stack frames recorded with each allocation: python (default), all (with C++ frames, slower), none",
    )
    parser.add_argument("--device", type=int, default=0, help="CUDA device index (default 0)")
    args = parser.parse_args(argv)
    if args.steps < 1:
        fail(f"--steps {args.steps}: expected 1 or more")
    if args.max_entries < 1000:
        fail(f"--max-entries {args.max_entries}: expected at least 1000")
    if os.path.exists(args.output) and os.path.getsize(args.output) > 0 and not args.overwrite:
        fail(f"{args.output}: already exists (--overwrite replaces it)")
    return args


def load_function(spec):
    """`file.py:fn` or `package.module:fn` -> the function."""
    target, sep, name = spec.rpartition(":")
    if not sep or not target or not name:
        fail(f"--script '{spec}': expected FILE.py:FUNCTION or MODULE:FUNCTION")
    try:
        if target.endswith(".py"):
            if not os.path.isfile(target):
                fail(f"--script '{spec}': {target} does not exist")
            module_spec = importlib.util.spec_from_file_location("capture_target", target)
            module = importlib.util.module_from_spec(module_spec)
            sys.path.insert(0, os.path.dirname(os.path.abspath(target)))
            module_spec.loader.exec_module(module)
        else:
            module = importlib.import_module(target)
    except ImportError as e:
        fail(f"--script '{spec}': cannot import {target}: {e}")
    function = getattr(module, name, None)
    if not callable(function):
        fail(f"--script '{spec}': {target} has no function {name}")
    return function


def builtin_steps(torch, steps, device):
    """A small decoder-style transformer: forward, backward and AdamW, `steps` times."""

    def run():
        torch.manual_seed(0)
        layer = torch.nn.TransformerEncoderLayer(d_model=512, nhead=8, dim_feedforward=2048, batch_first=True)
        model = torch.nn.Sequential(
            torch.nn.Embedding(8192, 512), torch.nn.TransformerEncoder(layer, num_layers=4), torch.nn.Linear(512, 8192)
        ).to(device)
        optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4)
        for _ in range(steps):
            tokens = torch.randint(0, 8192, (16, 256), device=device)
            logits = model(tokens)
            loss = torch.nn.functional.cross_entropy(logits.view(-1, 8192), tokens.view(-1))
            loss.backward()
            optimizer.step()
            optimizer.zero_grad(set_to_none=True)
        torch.cuda.synchronize(device)

    return run


def main(argv):
    args = parse_args(argv)
    steps = load_function(args.script) if args.script else None
    try:
        import torch
    except ImportError:
        fail("PyTorch is not installed (pip install torch, or python3-torch); it records the snapshot")
    if not torch.cuda.is_available():
        fail("no CUDA GPU (torch.cuda.is_available() is False): a memory snapshot is recorded on a GPU")
    if args.device < 0 or args.device >= torch.cuda.device_count():
        fail(f"--device {args.device}: expected 0 to {torch.cuda.device_count() - 1}")
    device = torch.device("cuda", args.device)
    torch.cuda.set_device(device)
    if torch.cuda.memory_reserved(device) > 0:
        print("capture_snapshot.py: warning: memory was reserved before recording began; "
              "the snapshot will start from a cut-off state", file=sys.stderr)
    memory = torch.cuda.memory
    params = inspect.signature(memory._record_memory_history).parameters
    if "max_entries" in params:  # PyTorch 2.1 and newer
        # enabled="all": allocations and segment events (alloc, free, segment_alloc/free/map/unmap).
        memory._record_memory_history(enabled="all", context="all" if args.stacks != "none" else None,
                                      stacks=args.stacks if args.stacks != "none" else "python",
                                      max_entries=args.max_entries)
    elif "trace_alloc_max_entries" in params:  # PyTorch 2.0: the history is always "all", Python stacks
        memory._record_memory_history(True, record_context=args.stacks != "none",
                                      trace_alloc_max_entries=args.max_entries, trace_alloc_record_context=True)
    else:
        fail(f"PyTorch {torch.__version__} records no allocation history; 2.0 or newer is needed")
    try:
        (steps or builtin_steps(torch, args.steps, device))()
        snapshot = memory._snapshot()
        entries = max((len(t) for t in snapshot.get("device_traces", [])), default=0)
        memory._dump_snapshot(args.output)
    finally:
        memory._record_memory_history(enabled=None)
    if entries >= args.max_entries:
        print(f"capture_snapshot.py: warning: the history holds {entries} entries, --max-entries: the oldest were "
              "dropped and validate will see a cut-off start; raise --max-entries", file=sys.stderr)
    print(f"wrote {args.output} ({entries} history entries on cuda:{args.device})")
    print(f"check it with: fraglab validate {args.output}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
