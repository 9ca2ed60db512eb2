#!/usr/bin/env python3
"""tests/integration/json_check.py: check shmrun's JSON output against its text.

    json_check.py plan TEXT JSON            `shmrun plan` and `shmrun plan --json`
    json_check.py ckpt list|verify TEXT JSON  `shmrun ckpt list|verify [--json]`
    json_check.py log FILE [need...]        every line of a --log-format=json log

Each mode parses the JSON (a parse error fails), reads the same values back out
of the text with regular expressions and compares them one by one, so the text
and the JSON must come from the same data. `log` checks that every line is one
JSON object with time (RFC 3339 UTC with ms), level, job and msg, worker when
a worker logged and stage with instance together; each NEED (`worker`,
`stage`, `launcher`, `msg~REGEX`) must be met by at least one line.
Prints "ok ..." and exits 0, or prints what differs and exits 1.
"""
import json
import re
import sys


def fail(msg):
    print("json_check: " + msg, file=sys.stderr)
    sys.exit(1)


def expect(what, got, want):
    if got != want:
        fail(f"{what}: JSON has {got!r}, the text {want!r}")


def check_plan(text_path, json_path):
    text = open(text_path).read().splitlines()
    doc = json.load(open(json_path))
    m = re.match(r"job (\S+): (\d+) workers?(?: on (\d+) hosts \((\d+) per host\))?, "
                 r"(\d+) stages?, (\d+) tasks?, (\d+) vnodes?, (\d+) channels?$", text[0])
    if not m:
        fail(f"plan text header not understood: {text[0]!r}")
    expect("job", doc["job"], m.group(1))
    hosts = int(m.group(3)) if m.group(3) else 1
    expect("workers", doc["workers"], int(m.group(2)))
    expect("hosts", doc["hosts"], hosts)
    expect("workers per host", doc["workers_per_host"],
           int(m.group(4)) if m.group(4) else int(m.group(2)))
    expect("stage count", len(doc["stages"]), int(m.group(5)))
    expect("task count", len(doc["tasks"]), int(m.group(6)))
    expect("vnodes", doc["vnodes"], int(m.group(7)))
    expect("channel count", sum(len(e["channels"]) for e in doc["edges"]), int(m.group(8)))
    expect("segment rings", doc["segment"]["rings"], int(m.group(8)))
    # with hosts > 1 a host column follows the worker's
    host_col = r" +(\d+)" if hosts > 1 else r"()"
    rows = [re.match(r"(\d+) +(\S+) +(\d+) +(\d+)" + host_col + r" +(-?\d+) +\[(\d+), (\d+)\)$", l)
            for l in text]
    rows = [r for r in rows if r]
    expect("task rows", len(rows), len(doc["tasks"]))
    for r, t in zip(rows, doc["tasks"]):
        expect(f"task {r.group(1)}",
               (t["task"], t["stage"], t["instance"], t["worker"],
                t["host"] if hosts > 1 else "", t["cpu"], t["vnode_lo"], t["vnode_hi"]),
               (int(r.group(1)), r.group(2), int(r.group(3)), int(r.group(4)),
                int(r.group(5)) if hosts > 1 else "", int(r.group(6)), int(r.group(7)),
                int(r.group(8))))
    kinds = {"forward": "forward", "shuffle by key": "shuffle", "rebalance": "rebalance",
             "broadcast": "broadcast"}
    edges = [re.match(r"  (\S+) -> (\S+): (forward|shuffle by key|rebalance|broadcast),"
                      r"[^,]*(, combined)?", l) for l in text]
    edges = [e for e in edges if e]
    expect("edge count", len(edges), len(doc["edges"]))
    for e, j in zip(edges, doc["edges"]):
        expect(f"edge {e.group(1)}->{e.group(2)}",
               (j["from"], j["to"], j["kind"], j["combined"]),
               (e.group(1), e.group(2), kinds[e.group(3)], e.group(4) is not None))
    chans = [re.match(r"    (\S+)\[(\d+)\] -> (\S+)\[(\d+)\]: ring (\d+), "
                      r"(local|crosses workers|crosses hosts) \(worker (\d+) -> (\d+)"
                      r"(?:, host (\d+) -> (\d+))?\)$", l) for l in text]
    chans = [c for c in chans if c]
    jchans = [(e["from"], c) for e in doc["edges"] for c in e["channels"]]
    expect("channel lines", len(chans), len(jchans))
    for c, (frm, j) in zip(chans, jchans):
        expect(f"ring {c.group(5)}",
               (frm, j["from_instance"], j["to_instance"], j["ring"], j["local"],
                j["from_worker"], j["to_worker"], j["crosses_hosts"],
                (j["from_host"], j["to_host"]) if hosts > 1 else None),
               (c.group(1), int(c.group(2)), int(c.group(4)), int(c.group(5)),
                c.group(6) == "local", int(c.group(7)), int(c.group(8)),
                c.group(6) == "crosses hosts",
                (int(c.group(9)), int(c.group(10))) if hosts > 1 else None))
    seg = [re.match(r"segment: (\d+) rings? of (\d+) bytes \((\d+) cross(?:es)? workers"
                    r"(?:, (\d+) cross(?:es)? hosts)?\), (\d+) bytes in all(?: on each host)?$", l)
           for l in text]
    seg = [s for s in seg if s]
    if len(seg) != 1:
        fail("plan text: no segment line")
    s = doc["segment"]
    g = seg[0].groups()
    expect("segment", (s["rings"], s["ring_bytes"], s["rings_crossing_workers"],
                       s["rings_crossing_hosts"] if hosts > 1 else None, s["bytes"]),
           (int(g[0]), int(g[1]), int(g[2]), int(g[3]) if hosts > 1 else None, int(g[4])))
    print(f"ok plan --json = text: {len(rows)} tasks, {len(edges)} edges, {len(chans)} rings")


def check_ckpt(cmd, text_path, json_path):
    text = open(text_path).read().splitlines()
    doc = json.load(open(json_path))
    lines = [l for l in text if l.startswith("ckpt-")]
    expect("checkpoint count", len(doc["checkpoints"]), len(lines))
    for l, c in zip(lines, doc["checkpoints"]):
        m = re.match(r"ckpt-(\d+) +(\S+) +(\S+)  (ok|incomplete|damaged|retired)(?:: (.*))?(.*)$",
                     l)
        if not m:
            fail(f"ckpt text line not understood: {l!r}")
        expect(f"{c['name']}: epoch", c["epoch"], int(m.group(1)))
        expect(f"{c['name']}: name", c["name"], "ckpt-" + m.group(1))
        expect(f"{c['name']}: status", c["status"], m.group(4))
        if c["status"] != "ok":
            expect(f"{c['name']}: reason", c["reason"], m.group(5))
            expect(f"{c['name']}: time", c["time"], None)
            continue
        expect(f"{c['name']}: reason", c["reason"], None)
        expect(f"{c['name']}: time", c["time"], m.group(2))
        expect(f"{c['name']}: bytes", c["bytes"], int(m.group(3)))
        stages = re.findall(r" (\S+)\(w(\d+)\): key-bound (\d+) B, per-worker (\d+) B "
                            r"\(max (\d+) B/instance\)", m.group(6))
        if not stages:
            fail(f"{c['name']}: no stage in the text: {l!r}")
        expect(f"{c['name']}: stages",
               [(s["name"], s["width"], s["key_bound_bytes"], s["per_worker_bytes"],
                 s["per_worker_max_bytes"]) for s in c["stages"]],
               [(n, int(w), int(k), int(p), int(x)) for n, w, k, p, x in stages])
    if cmd == "list":
        if "restore" in doc:
            fail("ckpt list --json has a restore field")
        print(f"ok ckpt list --json = text: {len(lines)} checkpoints")
        return
    r = doc["restore"]
    use = [re.search(r"a restore would use ckpt-(\d+)", l) for l in text]
    use = [u for u in use if u]
    if use:
        expect("restore", (r["action"], r["epoch"]), ("use", int(use[0].group(1))))
    elif any("a restore would refuse to start" in l for l in text):
        expect("restore", (r["action"], r["epoch"]), ("refuse", None))
    else:
        expect("restore", (r["action"], r["epoch"]), ("empty", None))
    newer = []
    for l in text:
        m = re.search(r": newer (.*) (?:incomplete|damaged)", l)
        if m:
            newer += m.group(1).split(", ")
    expect("skipped newer", sorted(r["skipped_newer"]), sorted(newer))
    dmg = [re.search(r": (\d+) damaged checkpoints?: verify fails", l) for l in text]
    dmg = [d for d in dmg if d]
    expect("damaged", doc["damaged"], int(dmg[0].group(1)) if dmg else 0)
    expect("incomplete", doc["incomplete"], sum(1 for c in doc["checkpoints"]
                                                if c["status"] == "incomplete"))
    live = [re.search(r"a live run \(pid (\d+)\)", l) for l in text]
    live = [x for x in live if x]
    expect("live_run_pid", doc["live_run_pid"], int(live[0].group(1)) if live else None)
    print(f"ok ckpt verify --json = text: {len(lines)} checkpoints, restore {r['action']}")


TIME = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$")


def check_log(path, needs):
    met = {n: False for n in needs}
    n = 0
    for i, l in enumerate(open(path), 1):
        try:
            o = json.loads(l)
        except ValueError as e:
            fail(f"{path}:{i}: not JSON ({e}): {l!r}")
        if not isinstance(o, dict):
            fail(f"{path}:{i}: not an object: {l!r}")
        for k in ("time", "level", "job", "msg"):
            if k not in o:
                fail(f"{path}:{i}: no {k}: {l!r}")
        if not TIME.match(o["time"]):
            fail(f"{path}:{i}: time is not RFC 3339 UTC with ms: {o['time']!r}")
        if o["level"] not in ("error", "warn", "info", "debug"):
            fail(f"{path}:{i}: level {o['level']!r}")
        if ("stage" in o) != ("instance" in o):
            fail(f"{path}:{i}: stage without instance or the reverse: {l!r}")
        if "worker" in o and not isinstance(o["worker"], int):
            fail(f"{path}:{i}: worker is not a number: {l!r}")
        n += 1
        for need in needs:
            if need == "worker":
                met[need] |= "worker" in o
            elif need == "stage":
                met[need] |= "stage" in o and "worker" in o
            elif need == "launcher":
                met[need] |= "worker" not in o
            elif need.startswith("msg~"):
                met[need] |= re.search(need[4:], o["msg"]) is not None
            elif need.startswith("job="):
                met[need] |= o["job"] == need[4:]
            else:
                fail(f"unknown need {need!r}")
    for need, ok in met.items():
        if not ok:
            fail(f"{path}: no line with {need} in {n} lines")
    if n == 0:
        fail(f"{path}: empty")
    print(f"ok {path}: {n} JSON lines, each parses and has its fields")


if __name__ == "__main__":
    a = sys.argv[1:]
    if len(a) == 3 and a[0] == "plan":
        check_plan(a[1], a[2])
    elif len(a) == 4 and a[0] == "ckpt" and a[1] in ("list", "verify"):
        check_ckpt(a[1], a[2], a[3])
    elif len(a) >= 2 and a[0] == "log":
        check_log(a[1], a[2:])
    else:
        fail("usage: see the top of this file")
