#!/usr/bin/env python3
"""Ledger for fault-injection runs, an independent Kafka client (confluent-kafka).

  ledger.py produce --brokers B --manifest M --prefix P --count N [--hostile H] [--users U] [--user-prefix S]
      Produces N valid jobs (one proxy target each, binding "<P>-b-<i>") and H hostile
      ones (key "<P>-h-<i>"), interleaved, to push.jobs; appends what it produced to M.
  ledger.py check --brokers B --manifest M [--record R] [--max-duplicates D] [--expect delivered]
                  [--retry-after-ms MS] [--timeout S] [--scenario NAME] [--rss-kb KB] [--row FILE]
      Reads push.outcomes and push.dlq from the beginning until every produced target has a
      final outcome and every hostile job a dead letter (or the timeout), then verifies:
        * every target of a valid job has >= 1 final outcome (else: lost);
        * no outcome or dead letter for a job that was never produced;
        * the DLQ holds exactly the hostile jobs (each with push-dlq-code and push-dlq-reason),
          no valid one;
        * duplicates: bindings the provider accepted more than once (from the sandbox's record
          file R), else bindings with differing final outcomes; at most D. Of those, the ones
          no broken connection explains (an accepted answer within 2 s before or 1 s after a reset
          or GOAWAY on its connection may never have reached the worker) at most
          --max-unexplained-duplicates. Byte-identical repeated outcomes are replays of the
          recorded outcome (no send), counted apart;
        * with --retry-after-ms, no target was retried sooner than that after a 503 or 429
          (one whose connection broke right after is not counted: the worker may not have seen it).
      Prints one row (jobs in, final outcomes, lost, duplicates, replays, dead letters, peak RSS)
      and appends it as JSON to --row.
"""
import argparse, json, os, sys, time
from collections import Counter, defaultdict
from confluent_kafka import Consumer, Producer, TopicPartition, OFFSET_BEGINNING

LOST_MS = 2000
AFTER_BREAK_MS = 1000
FINAL = {"delivered", "rejected", "failed", "expired", "deduplicated"}


def hostile_jobs(prefix, count, now):
    """Invalid inputs of every kind the issue names; each (key, value bytes, kind)."""
    def job(i, **overrides):
        body = {"v": 1, "id": f"{prefix}-h-{i}", "createdAt": now, "ttl": 300, "kind": "message",
                "userId": f"{prefix}-hu-{i}", "targets": [{"bindingId": f"{prefix}-hb-{i}", "provider": "proxy"}]}
        body.update(overrides)
        return json.dumps(body).encode()
    kinds = [
        ("invalid_json", lambda i: b'{"v":1,"id":"' + f"{prefix}-h-{i}".encode() + b'","targets":['),
        ("not_object", lambda i: b'[1,2,3]'),
        ("empty", lambda i: b''),
        ("wrong_type_v", lambda i: job(i, v="1")),
        ("wrong_type_ttl", lambda i: job(i, ttl="30")),
        ("wrong_type_targets", lambda i: job(i, targets={"bindingId": "x", "provider": "proxy"})),
        ("unknown_provider", lambda i: job(i, targets=[{"bindingId": f"{prefix}-hb-{i}", "provider": "carrier-pigeon"}])),
        # a few 1 MB strings (the partitions of the mock broker keep only ~5 MiB), the rest over-long ids
        ("huge_string", lambda i: job(i, body="x" * (1 << 20)) if i < 16 * 3 else job(i, id="i" * 300)),
        ("deep_nesting", lambda i: b'{"v":1,"id":"d","data":' + b'[' * 5_000 + b']' * 5_000 + b'}'),
        ("invalid_utf8", lambda i: job(i).replace(b'"kind"', b'"ki\xff\xfend"')),
        ("nul_byte", lambda i: job(i).replace(b'"message"', b'"mess\x00age"')),
        ("huge_targets", lambda i: job(i, targets=[{"bindingId": f"t{n}", "provider": "proxy"} for n in range(150)])),
        ("negative_ttl", lambda i: job(i, ttl=-5)),
        ("overflowing_ttl", lambda i: job(i).replace(b'"ttl": 300', b'"ttl": 99999999999999999999999')),
        ("missing_id", lambda i: json.dumps({"v": 1, "kind": "message", "userId": "u", "targets": []}).encode()),
        ("unknown_field", lambda i: job(i, surprise=True)),
    ]
    for i in range(count):
        name, make = kinds[i % len(kinds)]
        yield f"{prefix}-h-{i}", make(i), name


def produce(args):
    producer = Producer({"bootstrap.servers": args.brokers, "linger.ms": 20, "message.max.bytes": 4_000_000,
                         "queue.buffering.max.messages": 1_000_000, "queue.buffering.max.kbytes": 2_000_000})
    now = int(time.time() * 1000)
    hostile = list(hostile_jobs(args.prefix, args.hostile, now))
    manifest = open(args.manifest, "a")
    every = max(1, args.count // max(1, len(hostile))) if hostile else 0
    h = 0
    def send(key, value):
        while True:
            try:
                producer.produce(args.topic, key=key.encode(), value=value)
                return
            except BufferError:
                producer.poll(0.1)
    for i in range(args.count):
        user = f"{args.user_prefix}{i % args.users}" if args.users else f"{args.user_prefix}{args.prefix}-{i}"
        job_id = f"{args.prefix}-{i}"
        binding = f"{args.prefix}-b-{i}"
        value = json.dumps({"v": 1, "id": job_id, "createdAt": now, "ttl": args.ttl, "kind": "message", "userId": user,
                            "targets": [{"bindingId": binding, "provider": "proxy"}]}, separators=(",", ":")).encode()
        send(user, value)
        manifest.write(json.dumps({"id": job_id, "key": user, "bindings": [binding]}) + "\n")
        if every and i % every == 0 and h < len(hostile):
            key, value, kind = hostile[h]
            h += 1
            send(key, value)
            manifest.write(json.dumps({"hostile": key, "kind": kind}) + "\n")
        producer.poll(0)
    for key, value, kind in hostile[h:]:
        send(key, value)
        manifest.write(json.dumps({"hostile": key, "kind": kind}) + "\n")
    remaining = producer.flush(60)
    manifest.close()
    if remaining:
        sys.exit(f"ledger: {remaining} jobs not acknowledged by the broker")


def check(args):
    jobs, binding_job, hostile = {}, {}, {}
    for line in open(args.manifest):
        entry = json.loads(line)
        if "hostile" in entry:
            hostile[entry["hostile"]] = entry["kind"]
        else:
            jobs[entry["id"]] = entry
            for binding in entry["bindings"]:
                binding_job[binding] = entry["id"]
    consumer = Consumer({"bootstrap.servers": args.brokers, "group.id": f"ledger-{os.getpid()}-{time.time()}",
                         "enable.auto.commit": False, "fetch.message.max.bytes": 8_000_000})
    assignment = []
    for topic in (args.outcomes, args.dlq):
        metadata = consumer.list_topics(topic, timeout=10).topics[topic]
        assignment += [TopicPartition(topic, p, OFFSET_BEGINNING) for p in metadata.partitions]
    consumer.assign(assignment)
    finals = defaultdict(list)        # binding -> [outcome bytes]
    statuses = Counter()
    retrying = 0
    phantom = []
    dead = Counter()                  # key -> count
    dead_codes = Counter()
    dead_unlabelled = 0
    deadline = time.time() + args.timeout
    last_progress = time.time()
    while time.time() < deadline:
        messages = consumer.consume(1000, 0.5)
        for message in messages:
            if message.error():
                continue
            if message.topic() == args.dlq:
                key = (message.key() or b"").decode(errors="replace")
                headers = dict(message.headers() or [])
                if "push-dlq-code" not in headers or "push-dlq-reason" not in headers:
                    dead_unlabelled += 1
                dead[key] += 1
                dead_codes[headers.get("push-dlq-code", b"?").decode()] += 1
                continue
            outcome = json.loads(message.value())
            if outcome["jobId"] not in jobs:
                phantom.append(outcome["jobId"])
            if outcome["status"] == "retrying":
                retrying += 1
                continue
            finals[outcome["bindingId"]].append(message.value())
            statuses[outcome["status"]] += 1
        if messages:
            last_progress = time.time()
        complete = all(b in finals for b in binding_job) and all(k in dead for k in hostile)
        if complete and time.time() - last_progress > 1.5:
            break
    consumer.close()

    lost = [b for b in binding_job if b not in finals]
    missing_dead = [k for k in hostile if k not in dead]
    unexpected_dead = [k for k in dead if k not in hostile]
    differing = [b for b, values in finals.items() if len(set(values)) > 1]
    replays = sum(len(values) - len(set(values)) for values in finals.values())
    duplicates, unexplained, retry_after_violations, min_gap = len(differing), len(differing), 0, None
    if args.record:
        # <ms> <target> <label> [<connection>]; a connection "breaks" at a reset or GOAWAY. An answer
        # given on a connection that broke within LOST_MS after it, or in the moment the closing
        # connection still processed what it had read (AFTER_BREAK_MS), may never have reached the client.
        lines = []
        breaks = defaultdict(tuple)
        for line in open(args.record):
            parts = line.split()
            if len(parts) < 3:
                continue
            at, target, label, connection = int(parts[0]), parts[1], parts[2], parts[3] if len(parts) > 3 else "?"
            lines.append((at, target, label, connection))
            if label == "reset" or label.startswith("goaway:"):
                breaks[connection] += (at,)
        def maybe_lost(at, connection):
            # A killed worker may have been holding any answer it got before the kill without having
            # recorded it yet (window 1: bounded by its in-flight limit, not by time).
            return (any(b - LOST_MS <= at <= b + AFTER_BREAK_MS for b in breaks.get(connection, ()))
                    or any(at <= b + AFTER_BREAK_MS for b in args.broken_at))
        accepted = defaultdict(list)
        last_fault = {}
        for at, target, label, connection in lines:
            if target in last_fault:
                gap = at - last_fault.pop(target)
                min_gap = gap if min_gap is None else min(min_gap, gap)
                if args.retry_after_ms and gap < args.retry_after_ms:
                    retry_after_violations += 1
            status = label.split(":")[-1]
            if status.isdigit() and 200 <= int(status) < 300:
                accepted[target].append((at, connection))
            elif status in ("503", "429") and not maybe_lost(at, connection):
                last_fault[target] = at
        sent_twice = {t: a for t, a in accepted.items() if len(a) > 1 and t in binding_job}
        duplicates = len(sent_twice)
        # A second send is explained when an earlier accepted answer may have been lost to a broken connection.
        unexplained = sum(1 for a in sent_twice.values() if not any(maybe_lost(at, c) for at, c in a[:-1]))
    final_count = sum(len(v) for v in finals.values())
    rss_kb = args.rss_kb
    for pid in filter(None, (args.rss_pids or "").split(",")):
        try:
            for line in open(f"/proc/{pid}/status"):
                if line.startswith("VmHWM:"):
                    rss_kb = max(rss_kb, int(line.split()[1]))
        except OSError:
            pass
    row = {"scenario": args.scenario, "jobs_in": len(jobs) + len(hostile), "valid": len(jobs), "hostile": len(hostile),
           "final_outcomes": final_count, "targets_final": len(finals), "lost": len(lost), "duplicates": duplicates, "unexplained_duplicates": unexplained,
           "replays": replays, "retrying": retrying, "dead_letters": sum(dead.values()), "statuses": dict(statuses),
           "dlq_codes": dict(dead_codes), "peak_rss_mb": round(rss_kb / 1024, 1) if rss_kb else None,
           "min_retry_gap_ms": min_gap}
    print("ledger: " + json.dumps(row))
    if args.row:
        with open(args.row, "a") as f:
            f.write(json.dumps(row) + "\n")
    problems = []
    if lost:
        problems.append(f"{len(lost)} targets without a final outcome, e.g. {lost[:5]}")
    if phantom:
        problems.append(f"{len(phantom)} outcomes for jobs never produced, e.g. {phantom[:5]}")
    if missing_dead:
        problems.append(f"{len(missing_dead)} hostile jobs not in the DLQ, e.g. {[(k, hostile[k]) for k in missing_dead[:5]]}")
    if unexpected_dead:
        problems.append(f"{len(unexpected_dead)} dead letters that are not hostile jobs, e.g. {unexpected_dead[:5]}")
    if dead_unlabelled:
        problems.append(f"{dead_unlabelled} dead letters without push-dlq-code/push-dlq-reason")
    if duplicates > args.max_duplicates:
        problems.append(f"{duplicates} targets sent more than once (allowed {args.max_duplicates})")
    if unexplained > args.max_unexplained_duplicates:
        problems.append(f"{unexplained} targets sent more than once without a broken connection to explain it "
                        f"(allowed {args.max_unexplained_duplicates})")
    if args.expect and set(statuses) - {args.expect}:
        problems.append(f"expected every final outcome {args.expect}, got {dict(statuses)}")
    if retry_after_violations:
        problems.append(f"{retry_after_violations} retries sooner than Retry-After ({args.retry_after_ms} ms)")
    for problem in problems:
        print("ledger: FAIL: " + problem, file=sys.stderr)
    sys.exit(1 if problems else 0)


def main():
    parser = argparse.ArgumentParser()
    sub = parser.add_subparsers(dest="command", required=True)
    p = sub.add_parser("produce")
    p.add_argument("--brokers", required=True)
    p.add_argument("--topic", default="push.jobs")
    p.add_argument("--manifest", required=True)
    p.add_argument("--prefix", required=True)
    p.add_argument("--count", type=int, required=True)
    p.add_argument("--hostile", type=int, default=0)
    p.add_argument("--users", type=int, default=0, help="spread over this many user keys (0 = one per job)")
    p.add_argument("--user-prefix", default="user-")
    p.add_argument("--ttl", type=int, default=600)
    c = sub.add_parser("check")
    c.add_argument("--brokers", required=True)
    c.add_argument("--manifest", required=True)
    c.add_argument("--outcomes", default="push.outcomes")
    c.add_argument("--dlq", default="push.dlq")
    c.add_argument("--record")
    c.add_argument("--max-duplicates", type=int, default=0, help="targets the provider accepted more than once")
    c.add_argument("--max-unexplained-duplicates", type=int, default=0,
                   help="of those, targets whose earlier answers cannot have been lost to a reset or GOAWAY")
    c.add_argument("--expect")
    c.add_argument("--retry-after-ms", type=int, default=0)
    c.add_argument("--timeout", type=float, default=120)
    c.add_argument("--scenario", default="")
    c.add_argument("--broken-at", type=int, action="append", default=[],
                   help="ms since epoch when a worker was killed: every answer accepted before it may not have reached its record")
    c.add_argument("--rss-kb", type=int, default=0, help="a peak RSS measured before (e.g. of a killed worker)")
    c.add_argument("--rss-pids", help="comma-separated worker pids: their VmHWM when the check ends")
    c.add_argument("--row")
    args = parser.parse_args()
    produce(args) if args.command == "produce" else check(args)


if __name__ == "__main__":
    main()
