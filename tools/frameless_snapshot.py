#!/usr/bin/env python3
"""Writes a frameless PyTorch-style memory snapshot with CPython's own pickler (protocol 4), for
measuring pickle ingest on input without stack frames (README "Speed").

usage: tools/frameless_snapshot.py OUT.pickle [ENTRIES]   (default 300000; deterministic)

Like bench/ingest_pickle_bench.cpp's synthetic snapshot: one 8 GiB segment, then allocs in 4 MiB
slots and their free_requested/free_completed pairs, ~1000 live at a time, all freed by the end.
"""
import pickle
import random
import sys

out, entries = sys.argv[1], int(sys.argv[2]) if len(sys.argv) > 2 else 300_000
random.seed(7)
base, seg = 0x7F3A00000000, 8 << 30
trace = [dict(action="segment_alloc", addr=base, size=seg, stream=0, time_us=1, frames=[])]
live, now = {}, 1_748_730_219_595_970


def entry(action, slot, size):
    trace.append(dict(action=action, addr=base + slot * (4 << 20), size=size, stream=0,
                      time_us=now, frames=[]))


while len(trace) < entries:
    slot = random.randrange(2048)
    now += 1 + random.randrange(40)
    if slot not in live and len(live) < 1000:
        live[slot] = 1 + random.randrange(4 << 20 if random.randrange(4) == 0 else 64 << 10)
        entry("alloc", slot, live[slot])
    elif slot in live:
        entry("free_requested", slot, live[slot])
        entry("free_completed", slot, live.pop(slot))
for slot, size in live.items():
    entry("free_requested", slot, size)
    entry("free_completed", slot, size)
block = dict(address=base, size=seg, requested_size=0, state="inactive", frames=[])
segment = dict(device=0, address=base, total_size=seg, allocated_size=0, active_size=0,
               requested_size=0, stream=0, segment_type="large", is_expandable=False, frames=[],
               blocks=[block])
snapshot = dict(segments=[segment], device_traces=[trace],
                allocator_settings=dict(PYTORCH_CUDA_ALLOC_CONF="", max_split_size=-1,
                                        expandable_segments=False))
with open(out, "wb") as f:
    pickle.dump(snapshot, f, protocol=4)
print(f"{out}: {len(trace)} entries")
