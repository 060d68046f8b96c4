#!/usr/bin/env python3
"""Ledger for fault-injection runs, an independent Kafka client (confluent-kafka).

  ledger.py produce --brokers B --manifest M --prefix P --count N [--hostile H] [--users U] [--user-prefix S]
      Produces N valid jobs (one proxy target each, binding "<P>-b-<i>") and H hostile
      ones (key "<P>-h-<i>"), interleaved, to push.jobs; appends what it produced to M.
  ledger.py produce-endpoints --brokers B --manifest M --prefix P --count N --sandbox-dir D [--scale F] [--ttl S]
      Produces N jobs, each with one APNs, one Web Push and one proxy target (against `push-worker-dev sandbox
      --hostile` state in D); some targets carry a hostile marker (HOSTILE_MARKERS) and the manifest says
      per target which final statuses are right for it.
  ledger.py produce-apns --brokers B --manifest M --prefix P --count N --apps A,… [--rate R] [--expect S,…]
                  [--expect-reason TEXT] [--signers KID,…] [--label L]
      Produces N jobs of one APNs target each (binding "<P>-a-<i>", a token of its own), the apps (bundle ids)
      taken in turn; the manifest marks each target "<L or apns>:<app>" (the row counts final statuses per app) and
      says which final statuses (--expect, default delivered) and reason (--expect-reason, a substring) are right
      for it, and which key ids may have signed its requests in the sandbox's record (--signers; "none": it must
      never reach the provider).
  ledger.py check --brokers B --manifest M [--record R] [--max-duplicates D] [--expect delivered]
                  [--retry-after-ms MS] [--timeout S] [--scenario NAME] [--rss-kb KB] [--row FILE]
                  [--alive-pids P,…] [--connect-log F] [--forbid-signer KID@MS …]
      Reads push.outcomes and push.dlq from the beginning until every produced target has a
      final outcome and every hostile job a dead letter (or the timeout, or one of --alive-pids
      exiting), then verifies:
        * every target of a valid job has >= 1 final outcome (else: lost);
        * targets the manifest gives expected statuses (by marker) ended in one of them; the others
          in --expect; the row counts final statuses per marker;
        * no outcome or dead letter for a job that was never produced;
        * the DLQ holds exactly the hostile jobs (each with push-dlq-code and push-dlq-reason),
          no valid one, except `attempts_exhausted` copies of jobs with a `failed` target;
        * duplicates: bindings the provider accepted more than once (from the sandbox's record
          file R), else bindings with differing final outcomes; at most D. Of those, the ones
          no broken connection explains (an accepted answer within 2 s before or 1 s after a reset
          or GOAWAY on its connection may never have reached the worker; one given only after a
          stall past the worker's request timeout did not) at most
          --max-unexplained-duplicates. Byte-identical repeated outcomes are replays of the
          recorded outcome (no send), counted apart;
        * with --retry-after-ms, no target was retried sooner than that after a 503 or 429
          (one whose connection broke right after is not counted: the worker may not have seen it).
        * with --connect-log (strace -e trace=connect of the worker), no connection attempt to an
          address that is not loopback (endpoints on private networks must be refused unsent);
        * every pid of --alive-pids is still running;
        * targets with an expected reason ended with a reason containing it; targets the manifest names signers
          for were recorded (5th field of R) signed by those keys only; no request was signed with a key
          of --forbid-signer KID@MS at or after MS (ms since the epoch).
      Prints one row (jobs in, final outcomes, lost, duplicates, replays, dead letters, peak RSS)
      and appends it as JSON to --row.
"""
import argparse, ipaddress, json, os, re, sys, time, zlib
from collections import Counter, defaultdict
from confluent_kafka import Consumer, Producer, TopicPartition, OFFSET_BEGINNING

LOST_MS = 2000
AFTER_BREAK_MS = 1000
# A connection that closes this soon after a kill belonged to the killed worker (a loaded sandbox may see the close seconds late).
KILLED_CLOSE_MS = 30000
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
        # header injection: a CR/LF in a field that reaches an HTTP header must never reach the wire
        ("header_injection", lambda i: job(i, collapseKey="x\r\napns-push-type: voip")),
        ("endpoint_injection", lambda i: job(i, targets=[{"bindingId": f"{prefix}-hb-{i}", "provider": "proxy",
                                                          "token": "t\r\nx-injected: 1", "tokenType": "fcm"}])),
    ]
    for i in range(count):
        name, make = kinds[i % len(kinds)]
        yield f"{prefix}-h-{i}", make(i), name


class JobWriter:
    """Produces jobs to --topic and appends their lines to --manifest; when librdkafka's queue is full it waits for room."""

    def __init__(self, args, **config):
        self.producer = Producer({"bootstrap.servers": args.brokers, **config})
        self.topic = args.topic
        self.manifest = open(args.manifest, "a")

    def send(self, key, job, entry=None):
        """`job` is a dict (sent as compact JSON) or bytes; `entry` its manifest line."""
        value = job if isinstance(job, bytes) else json.dumps(job, separators=(",", ":")).encode()
        while True:
            try:
                self.producer.produce(self.topic, key=key.encode(), value=value)
                break
            except BufferError:
                self.producer.poll(0.1)
        if entry is not None:
            self.manifest.write(json.dumps(entry) + "\n")
        self.producer.poll(0)

    def close(self):
        remaining = self.producer.flush(60)
        self.manifest.close()
        if remaining:
            sys.exit(f"ledger: {remaining} jobs not acknowledged by the broker")


def produce(args):
    writer = JobWriter(args, **{"linger.ms": 20, "message.max.bytes": 4_000_000, "queue.buffering.max.messages": 1_000_000,
                                "queue.buffering.max.kbytes": 2_000_000})
    now = int(time.time() * 1000)
    hostile = list(hostile_jobs(args.prefix, args.hostile, now))
    every = max(1, args.count // max(1, len(hostile))) if hostile else 0
    h = 0
    for i in range(args.count):
        user = f"{args.user_prefix}{i % args.users}" if args.users else f"{args.user_prefix}{args.prefix}-{i}"
        job_id = f"{args.prefix}-{i}"
        binding = f"{args.prefix}-b-{i}"
        value = json.dumps({"v": 1, "id": job_id, "createdAt": now, "ttl": args.ttl, "kind": "message", "userId": user,
                            "targets": [{"bindingId": binding, "provider": "proxy"}]}, separators=(",", ":")).encode()
        writer.send(user, value, {"id": job_id, "key": user, "bindings": [binding]})
        if every and i % every == 0 and h < len(hostile):
            key, value, kind = hostile[h]
            h += 1
            writer.send(key, value, {"hostile": key, "kind": kind})
    for key, value, kind in hostile[h:]:
        writer.send(key, value, {"hostile": key, "kind": kind})
    writer.close()


# Hostile endpoints: marker -> (count at scale 1 per provider, providers, final statuses that are right).
# The sandbox answers each marked target as HostileAnswers (Sources/PushSandbox) describes.
HOSTILE_MARKERS = {
    # RFC 9110 §10.2.3 puts no bound on Retry-After: the worker caps it to the TTL, so never delivered.
    "retry-after-huge-429": (8, ("apns", "webpush", "proxy"), ("expired", "failed")),
    "retry-after-huge-503": (8, ("apns", "webpush", "proxy"), ("expired", "failed")),
    # The status is the answer; a huge body must neither be buffered whole nor turn success into a retry.
    "huge-200": (3, ("apns", "webpush", "proxy"), ("delivered",)),
    "huge-400": (3, ("apns", "webpush", "proxy"), ("failed", "rejected")),
    # One subscription refused (RFC 8292 §4.2): that target fails, nothing else of its app or origin.
    "forbidden-once": (8, ("webpush",), ("failed",)),
    # Transient (a timeout, a broken connection): delivered on a later attempt.
    "stall": (6, ("apns", "webpush", "proxy"), ("delivered",)),
    "reset": (6, ("apns", "webpush", "proxy"), ("delivered",)),
    # Web Push endpoints come from browsers: private, NAT64 (RFC 6052) and IPv4-mapped (RFC 4291 §2.5.5.2)
    # addresses of private networks are refused before any request (server-side request forgery).
    "private-10": (2, ("webpush",), ("failed",)),
    "private-nat64": (2, ("webpush",), ("failed",)),
    "private-mapped": (2, ("webpush",), ("failed",)),
    "private-192": (2, ("webpush",), ("failed",)),
    "private-metadata": (2, ("webpush",), ("failed",)),
    # A push service whose name server never answers (faults.sh stalls points the worker's resolver at a silent
    # one): each attempt ends at the DNS timeout, retried until its attempts or TTL end; nothing else waits for it.
    # Only when named in --markers: elsewhere the lookup would go to the machine's real name server.
    "dns-silent": (4, ("webpush",), ("expired", "failed")),
    # A push service whose name server answers SERVFAIL for a while, then resolves (faults.sh stalls runs
    # scripts/flaky-dns.py): a lookup that failed for now is retried, so every one is delivered.
    "dns-flaky": (4, ("webpush",), ("delivered",)),
}
EXPLICIT_MARKERS = {"dns-silent", "dns-flaky"}
SILENT_DNS_ORIGIN = "https://push.dns-silent.example"
FLAKY_DNS_HOST = "push.dns-flaky.example"
PRIVATE_ORIGINS = {
    "private-10": "https://10.0.0.1",
    "private-nat64": "https://[64:ff9b::a00:1]",
    "private-mapped": "https://[::ffff:10.0.0.1]",
    "private-192": "https://192.168.1.1",
    "private-metadata": "https://[::ffff:169.254.169.254]",
}
# APNs tokens are hex: "dead" + the code HostileAnswers.Behaviour.apnsCode gives each behaviour.
APNS_CODES = {"retry-after-huge-429": "01", "retry-after-huge-503": "02", "huge-200": "03", "huge-400": "04",
              "forbidden-once": "05", "stall": "06", "reset": "07"}


def produce_refused(args):
    """Jobs whose one Web Push endpoint is on a host of its own that refuses it (a private address of 10.0.0.0/8, by
    literal or with --names by a name, refused before any connection; with --names also names of loopback addresses
    where nothing listens, refused by the host): each names an origin the worker never saw (state keyed by outside
    values)."""
    keys = json.load(open(os.path.join(args.sandbox_dir, "webpush-subscription.json")))["keys"]
    writer = JobWriter(args, **{"linger.ms": 20, "queue.buffering.max.messages": 1_000_000})
    now = int(time.time() * 1000)
    for i in range(args.first, args.first + args.count):
        host = f"10.{(i >> 16) & 255}.{(i >> 8) & 255}.{i & 255}"
        if args.names and i % 4 == 3:
            host = f"h{i}.refused.test"
        elif args.names and i % 2 == 0:
            host = f"c{i}.refused.test"
        binding, user = f"{args.prefix}-w-{i}", f"{args.prefix}-u-{i}"
        job = {"v": 1, "id": f"{args.prefix}-{i}", "createdAt": now, "ttl": 600, "kind": "message", "userId": user,
               "targets": [{"bindingId": binding, "provider": "webpush", "endpoint": f"https://{host}/push/{i}", "keys": keys}]}
        writer.send(user, job, {"id": job["id"], "key": user, "bindings": [binding], "expect": {binding: ["failed"]}})
    writer.close()


def produce_endpoints(args):
    """Jobs of three targets (APNs, Web Push, proxy); hostile markers spread evenly over the stream."""
    subscription = json.load(open(os.path.join(args.sandbox_dir, "webpush-subscription.json")))
    origin = open(os.path.join(args.sandbox_dir, "webpush-url")).read().strip()
    base = "/push/" + subscription["endpoint"].rsplit("/push/", 1)[1]
    only = set(filter(None, (args.markers or "").split(",")))
    slots = {provider: [] for provider in ("apns", "webpush", "proxy")}
    for marker, (count, providers, _) in HOSTILE_MARKERS.items():
        if (only and marker not in only) or (marker in EXPLICIT_MARKERS and marker not in only):
            continue
        for provider in providers:
            slots[provider] += [marker] * max(1, int(count * args.scale))
    for provider, markers in slots.items():
        if len(markers) > args.count:
            sys.exit(f"ledger: {len(markers)} hostile {provider} targets do not fit into {args.count} jobs")
    # Job index -> marker, per provider: evenly spaced, each provider shifted so one job rarely holds two.
    assigned = {provider: {} for provider in slots}
    for shift, (provider, markers) in enumerate(slots.items()):
        step = args.count / max(1, len(markers))
        for n, marker in enumerate(markers):
            assigned[provider][(int(n * step) + shift * int(step / 3)) % args.count] = marker
    writer = JobWriter(args, **{"linger.ms": 20})
    now = int(time.time() * 1000)
    p = args.prefix
    started = time.time()
    for i in range(args.count):
        if args.rate:
            time.sleep(max(0.0, started + i / args.rate - time.time()))
        # A 403 arrives while nothing else is in flight, so no unrelated success can undo what it does to
        # the worker's state (an app-wide circuit) before the next targets come.
        quiet = args.rate and "forbidden-once" in (assigned["webpush"].get(i), assigned["webpush"].get(i - 1))
        if quiet:
            writer.producer.flush(10)
            time.sleep(0.5)
            started += 0.5
        expect, markers, record_keys, targets = {}, {}, {}, []
        marker = assigned["apns"].get(i)
        token = f"dead{APNS_CODES[marker]}{i:058x}" if marker else f"aa{i:062x}"
        targets.append({"bindingId": f"{p}-a-{i}", "provider": "apns", "app": "com.example.chat", "token": token,
                        "environment": "production"})
        record_keys[token] = f"{p}-a-{i}"
        markers[f"{p}-a-{i}"] = f"apns:{marker or 'normal'}"
        marker = assigned["webpush"].get(i)
        if marker in PRIVATE_ORIGINS:
            endpoint = f"{PRIVATE_ORIGINS[marker]}{base}/hostile/{marker}/{i}"
        elif marker == "dns-silent":
            endpoint = f"{SILENT_DNS_ORIGIN}{base}/hostile/{marker}/{i}"
        elif marker == "dns-flaky":
            endpoint = f"https://{FLAKY_DNS_HOST}:{origin.rsplit(':', 1)[1]}{base}/n/{i}"
        else:
            endpoint = f"{origin}{base}/hostile/{marker}/{i}" if marker else f"{origin}{base}/n/{i}"
        targets.append({"bindingId": f"{p}-w-{i}", "provider": "webpush", "endpoint": endpoint, "keys": subscription["keys"]})
        record_keys["/" + endpoint.split("/", 3)[3]] = f"{p}-w-{i}"  # the sandbox records the request path
        markers[f"{p}-w-{i}"] = f"webpush:{marker or 'normal'}"
        marker = assigned["proxy"].get(i)
        binding = f"{p}-p-{i}/hostile/{marker}" if marker else f"{p}-p-{i}"
        targets.append({"bindingId": binding, "provider": "proxy"})
        record_keys[binding] = binding
        markers[binding] = f"proxy:{marker or 'normal'}"
        for binding, label in markers.items():
            name = label.split(":", 1)[1]
            expect[binding] = list(HOSTILE_MARKERS[name][2]) if name in HOSTILE_MARKERS else ["delivered"]
        user = f"{p}-u-{i}"
        job = {"v": 1, "id": f"{p}-{i}", "createdAt": now, "ttl": args.ttl, "kind": "message", "userId": user,
               "notification": {"title": "hostile endpoints", "body": f"job {i}"}, "targets": targets}
        writer.send(user, job, {"id": job["id"], "key": user, "bindings": list(markers), "expect": expect,
                                "markers": markers, "record_keys": record_keys})
    writer.close()


def produce_apns(args):
    """Jobs of one APNs target each, for the apps in turn, at --rate; see the module doc."""
    apps = [a for a in args.apps.split(",") if a]
    expect = [s for s in args.expect.split(",") if s]
    signers = [] if args.signers == "none" else [k for k in (args.signers or "").split(",") if k]
    writer = JobWriter(args, **{"linger.ms": 5})
    now = int(time.time() * 1000)
    started = time.time()
    for i in range(args.count):
        if args.rate:
            time.sleep(max(0.0, started + i / args.rate - time.time()))
        app, binding = apps[i % len(apps)], f"{args.prefix}-a-{i}"
        token = f"a{zlib.crc32(args.prefix.encode()) & 0xfffffff:07x}{i:056x}"   # "a…": none of the sandbox's scripted prefixes
        user = f"{args.prefix}-u-{i}"
        job = {"v": 1, "id": f"{args.prefix}-{i}", "createdAt": now, "ttl": args.ttl, "kind": "message", "userId": user,
               "notification": {"title": "reload", "body": f"job {i}"},
               "targets": [{"bindingId": binding, "provider": "apns", "app": app, "token": token, "environment": "production"}]}
        entry = {"id": job["id"], "key": user, "bindings": [binding], "expect": {binding: expect},
                 "markers": {binding: f"{args.label or 'apns'}:{app}"}, "record_keys": {token: binding}}
        if args.expect_reason:
            entry["reasons"] = {binding: args.expect_reason}
        if args.signers:
            entry["signers"] = {binding: signers}
        writer.send(user, job, entry)
    writer.close()


def peak_rss_kb(pid):
    try:
        for line in open(f"/proc/{pid}/status"):
            if line.startswith("VmHWM:"):
                return int(line.split()[1])
    except OSError:
        pass
    return 0


def running(pid):
    try:
        for line in open(f"/proc/{pid}/status"):
            if line.startswith("State:"):
                return "Z" not in line.split()[1]
    except OSError:
        return False
    return True


def non_loopback_connects(path):
    """Addresses (with ports) of connect() calls in an strace log that are not loopback."""
    found = []
    pattern = re.compile(r'(?:sin_port=htons\((\d+)\), sin_addr=inet_addr\("([^"]+)"\))|'
                         r'(?:sin6_port=htons\((\d+)\).*?inet_pton\(AF_INET6, "([^"]+)")')
    for line in open(path, errors="replace"):
        if "connect(" not in line:
            continue
        for match in pattern.finditer(line):
            port, text = (match.group(1), match.group(2)) if match.group(2) else (match.group(3), match.group(4))
            address = ipaddress.ip_address(text)
            mapped = getattr(address, "ipv4_mapped", None)
            if not (address.is_loopback or (mapped is not None and mapped.is_loopback)):
                found.append(f"{text}:{port}")
    return found


def check(args):
    jobs, binding_job, hostile = {}, {}, {}
    expected, marker_of, record_binding = {}, {}, {}   # per binding (produce-endpoints), record key -> binding
    reasons, signers = {}, {}                          # per binding (produce-apns)
    for line in open(args.manifest):
        entry = json.loads(line)
        if "hostile" in entry:
            hostile[entry["hostile"]] = entry["kind"]
        else:
            jobs[entry["id"]] = entry
            for binding in entry["bindings"]:
                binding_job[binding] = entry["id"]
            expected.update({b: set(v) for b, v in entry.get("expect", {}).items()})
            marker_of.update(entry.get("markers", {}))
            record_binding.update(entry.get("record_keys", {}))
            reasons.update(entry.get("reasons", {}))
            signers.update({b: set(v) for b, v in entry.get("signers", {}).items()})
    alive_pids = list(filter(None, (args.alive_pids or "").split(",")))
    gone = []
    rss_pids = list(filter(None, (args.rss_pids or "").split(",")))
    rss_kb = args.rss_kb
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
    key_codes = defaultdict(set)
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
                key_codes[key].add(headers.get("push-dlq-code", b"?").decode())
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
        rss_kb = max([rss_kb] + [peak_rss_kb(pid) for pid in rss_pids])   # also of a worker that dies later
        if not gone:
            gone = [pid for pid in alive_pids if not running(pid)]
            if gone:
                deadline = min(deadline, time.time() + 3)   # what it published before it went
    consumer.close()

    lost = [b for b in binding_job if b not in finals]
    missing_dead = [k for k in hostile if k not in dead]
    key_jobs = defaultdict(list)
    for job_id, entry in jobs.items():
        key_jobs[entry.get("key")].append(job_id)
    def exhausted(key):  # the worker's copy of a job one of whose targets ran out of attempts
        return key_codes[key] == {"attempts_exhausted"} and any(
            json.loads(v)["status"] == "failed" for j in key_jobs[key] for b in jobs[j]["bindings"] for v in finals.get(b, []))
    unexpected_dead = [k for k in dead if k not in hostile and not exhausted(k)]
    differing = [b for b, values in finals.items() if len(set(values)) > 1]
    replays = sum(len(values) - len(set(values)) for values in finals.values())
    duplicates, unexplained, retry_after_violations, min_gap = len(differing), len(differing), 0, None
    wrong_reason = [b for b, text in reasons.items() for v in finals.get(b, []) if text not in (json.loads(v).get("reason") or "")]
    forbidden = [(kid, int(at)) for kid, at in (f.split("@", 1) for f in args.forbid_signer)]
    wrong_signer, forbidden_signed = [], []
    if args.record:
        # <ms> <target> <label> [<connection>]; a connection "breaks" at a reset, a GOAWAY or when it closed. An answer
        # given on a connection that broke within LOST_MS after it, or in the moment the closing
        # connection still processed what it had read (AFTER_BREAK_MS), may never have reached the client.
        lines = []
        breaks = defaultdict(tuple)
        killed_connections = set()
        for line in open(args.record):
            parts = line.split()
            if len(parts) < 3:
                continue
            at, target, label, connection = int(parts[0]), parts[1], parts[2], parts[3] if len(parts) > 3 else "?"
            target = record_binding.get(target, target)
            signer = parts[4] if len(parts) > 4 else None
            if target in signers and signer not in signers[target]:
                wrong_signer.append((target, signer))
            if signer and any(signer == kid and at >= since for kid, since in forbidden):
                forbidden_signed.append((target, signer, at))
            lines.append((at, target, label, connection))
            if label in ("reset", "closed") or label.startswith("goaway:"):
                breaks[connection] += (at,)
            if label == "closed" and any(k <= at <= k + KILLED_CLOSE_MS for k in args.broken_at):
                killed_connections.add(connection)
        def maybe_lost(at, connection):
            # A killed worker may have been holding any answer it got before the kill without having
            # recorded it yet (window 1: bounded by its in-flight limit, not by time). What the sandbox
            # answered on its connections after the kill (requests it read late) never reached it.
            return (any(b - LOST_MS <= at <= b + AFTER_BREAK_MS for b in breaks.get(connection, ()))
                    or any(at <= b + AFTER_BREAK_MS for b in args.broken_at)
                    or (connection in killed_connections and any(at >= k for k in args.broken_at)))
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
                accepted[target].append((at, connection, label))
            elif status in ("503", "429") and not maybe_lost(at, connection):
                last_fault[target] = at
        sent_twice = {t: a for t, a in accepted.items() if len(a) > 1 and t in binding_job}
        duplicates = len(sent_twice)
        # A second send is explained when an earlier accepted answer may have been lost to a broken connection, or
        # came only after a stall longer than the worker's request timeout (the worker had given up on it: the
        # provider accepted a push the worker could not know about).
        unexplained = sum(1 for a in sent_twice.values()
                          if not any(maybe_lost(at, c) or label.startswith("stall") for at, c, label in a[:-1]))
    final_count = sum(len(v) for v in finals.values())
    by_marker = defaultdict(Counter)
    wrong = defaultdict(Counter)          # marker -> statuses outside its expectation
    for binding, values in finals.items():
        for status in {json.loads(v)["status"] for v in values}:
            by_marker[marker_of.get(binding, "-")][status] += 1
            allowed = expected.get(binding, {args.expect} if args.expect else None)
            if allowed is not None and status not in allowed:
                wrong[marker_of.get(binding, "-")][status] += 1
    for binding in lost:
        by_marker[marker_of.get(binding, "-")]["lost"] += 1
    connects = non_loopback_connects(args.connect_log) if args.connect_log else []
    rss_kb = max([rss_kb] + [peak_rss_kb(pid) for pid in rss_pids])
    row = {"scenario": args.scenario, "jobs_in": len(jobs) + len(hostile), "valid": len(jobs), "hostile": len(hostile),
           "final_outcomes": final_count, "targets_final": len(finals), "lost": len(lost), "duplicates": duplicates, "unexplained_duplicates": unexplained,
           "replays": replays, "retrying": retrying, "dead_letters": sum(dead.values()), "statuses": dict(statuses),
           "dlq_codes": dict(dead_codes), "peak_rss_mb": round(rss_kb / 1024, 1) if rss_kb else None,
           "min_retry_gap_ms": min_gap}
    if marker_of:
        row["markers"] = {m: dict(c) for m, c in sorted(by_marker.items())}
    if args.connect_log:
        row["non_loopback_connects"] = len(connects)
    if reasons or signers or forbidden:
        row["wrong_reason"], row["wrong_signer"], row["forbidden_signer"] = len(wrong_reason), len(wrong_signer), len(forbidden_signed)
    if alive_pids:
        row["workers_gone"] = gone or [pid for pid in alive_pids if not running(pid)]
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
    for marker, counts in sorted(wrong.items()):
        allowed = sorted(next((expected[b] for b, m in marker_of.items() if m == marker and b in expected), {args.expect}))
        problems.append(f"{marker}: expected {'/'.join(allowed)}, got {dict(counts)} (all: {dict(by_marker[marker])})")
    if connects:
        problems.append(f"{len(connects)} connection attempts to addresses that are not loopback, e.g. {sorted(set(connects))[:5]}")
    if row.get("workers_gone"):
        problems.append(f"worker process(es) {row['workers_gone']} exited during the run")
    if wrong_reason:
        problems.append(f"{len(wrong_reason)} targets without their expected reason, e.g. {[(b, reasons[b]) for b in wrong_reason[:3]]}")
    if wrong_signer:
        problems.append(f"{len(wrong_signer)} provider requests signed by a key their target may not use (or unsent targets sent), "
                        f"e.g. {wrong_signer[:5]}")
    if forbidden_signed:
        problems.append(f"{len(forbidden_signed)} provider requests signed with a key after it was dropped, e.g. {forbidden_signed[:5]}")
    if retry_after_violations:
        problems.append(f"{retry_after_violations} retries sooner than Retry-After ({args.retry_after_ms} ms)")
    for problem in problems:
        print("ledger: FAIL: " + problem, file=sys.stderr)
    sys.exit(1 if problems else 0)



def producer_parser(sub, name):
    """A subcommand that produces jobs: the arguments every one of them takes (JobWriter's and the job ids' prefix)."""
    parser = sub.add_parser(name)
    parser.add_argument("--brokers", required=True)
    parser.add_argument("--topic", default="push.jobs")
    parser.add_argument("--manifest", required=True)
    parser.add_argument("--prefix", required=True)
    return parser

def main():
    parser = argparse.ArgumentParser()
    sub = parser.add_subparsers(dest="command", required=True)
    p = producer_parser(sub, "produce")
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
    c.add_argument("--rss-pids", help="comma-separated worker pids: their highest VmHWM seen during the check")
    c.add_argument("--row")
    c.add_argument("--alive-pids", help="comma-separated worker pids that must stay up; the check ends soon after one exits")
    c.add_argument("--connect-log", help="strace -e trace=connect output of the worker")
    c.add_argument("--forbid-signer", action="append", default=[],
                   help="KID@MS: no request in the record may be signed with key id KID at or after MS (ms since the epoch)")
    e = producer_parser(sub, "produce-endpoints")
    e.add_argument("--count", type=int, required=True, help="jobs, three targets each")
    e.add_argument("--sandbox-dir", required=True, help="state directory of `push-worker-dev sandbox --hostile`")
    e.add_argument("--scale", type=float, default=1.0, help="multiplies the hostile target counts (at least 1 each)")
    e.add_argument("--markers", help="comma-separated subset of the hostile markers (default: all)")
    e.add_argument("--ttl", type=int, default=60)
    e.add_argument("--rate", type=float, default=0, help="jobs per second (0: as fast as the broker takes them)")
    a = producer_parser(sub, "produce-apns")
    a.add_argument("--count", type=int, required=True, help="jobs, one APNs target each")
    a.add_argument("--apps", required=True, help="comma-separated bundle ids, taken in turn")
    a.add_argument("--rate", type=float, default=0, help="jobs per second (0: as fast as the broker takes them)")
    a.add_argument("--ttl", type=int, default=120)
    a.add_argument("--expect", default="delivered", help="comma-separated final statuses that are right")
    a.add_argument("--expect-reason", help="a substring the final outcome's reason must hold")
    a.add_argument("--signers", help="comma-separated key ids that may sign these targets' requests; none: never sent")
    a.add_argument("--label", help="marker prefix in the row (default apns)")
    r = producer_parser(sub, "produce-refused")
    r.add_argument("--count", type=int, required=True, help="jobs, one Web Push target each, every one on another host")
    r.add_argument("--first", type=int, default=0, help="the first job's host number (hosts first … first+count-1)")
    r.add_argument("--names", action="store_true",
                   help="hosts by name (scripts/refused-dns.py): one in four h<N>.refused.test, a private 10.x.y.z the policy "
                        "refuses; one in two c<N>.refused.test, a loopback 127.x.y.z that refuses the connection (for a "
                        "worker that allows 127.0.0.0/8); the rest 10.x.y.z literals")
    r.add_argument("--sandbox-dir", required=True, help="state directory of `push-worker-dev sandbox` (for the subscription's keys)")
    args = parser.parse_args()
    {"produce": produce, "produce-endpoints": produce_endpoints, "produce-refused": produce_refused, "produce-apns": produce_apns,
     "check": check}[args.command](args)


if __name__ == "__main__":
    main()
