#!/usr/bin/env python3
"""Writes the seed inputs of the fuzz targets that read structured input (FuzzInput.swift,
FuzzJob.swift) into fuzz/corpus/<target>/seed-*: small meaningful cases and the hostile values
of the overflow issue. Run from the repository root; the fuzzers add their own finds by merge."""
import os

MIN, MAX = -(1 << 63), (1 << 63) - 1
EPOCH = 1_795_310_000_000
KINDS = ["call", "message", "cancel", "custom", "wake"]
PROVIDERS = ["apns", "fcm", "webpush", "proxy"]
TOKEN = "ab" * 32


def byte(v): return bytes([v & 0xFF])
def flag(b): return byte(1 if b else 0)
def raw64(v): return (v & ((1 << 64) - 1)).to_bytes(8, "little")
def i64(v): return byte(8) + raw64(v)  # selector 8: eight raw bytes
def ranged(low, v): return raw64(v - low)  # FuzzInput.int64(in:) for a value inside the range


def data(b):
    if isinstance(b, str): b = b.encode()
    head = byte(len(b)) if len(b) < 0xF0 else byte(0xF0) + len(b).to_bytes(3, "big")
    return head + b


def opt(s): return flag(True) if s is None else flag(False) + data(s)


def generated(count, step, offset, salt):
    """TemplatesFuzz's generatedObject(prefix:): a count of members and how their names and values go."""
    return byte(count >> 8) + byte(count) + byte(step - 1) + byte(offset) + byte(salt)


def json_object(count, value, start=0):
    return "{" + ",".join(f'"k{i}":{value(i)}' for i in range(start, start + count)) + "}"


def merge_value(i):
    return ["null", '{"x":1,"y":null}', '"s"', "[1,null]"][i % 4]


def delivery(kind="call", created=None, ttl=None, priority=None, user="u1", collapse=None, notification=None,
             fields=None, body=None, binding=None, provider="apns", target=None, keys=None, kafka=EPOCH, attempt=1, now=EPOCH):
    """FuzzInput.delivery(): target is a dict of app/token/environment/pushType/endpoint/tokenType/platform."""
    flags = (created is not None) | (ttl is not None) << 1 | (priority is not None) << 2 | (collapse is not None) << 3 \
        | (notification is not None) << 4 | (fields is not None) << 5 | (body is not None) << 6 | (binding is not None) << 7
    out = byte(flags) + data("job-1") + byte(KINDS.index(kind))
    if created is not None: out += i64(created)
    if ttl is not None: out += i64(ttl)
    if priority is not None: out += flag(priority == "high")
    out += data(user)
    if collapse is not None: out += data(collapse)
    if notification is not None:
        title, text, sound, badge = notification
        out += opt(title) + opt(text) + opt(sound) + flag(badge is not None) + (i64(badge) if badge is not None else b"")
    if fields is not None:
        out += byte(len(fields)) + b"".join(data(k) + data(v) for k, v in fields.items())
    if body is not None: out += data(body)
    out += data("binding-1")
    if binding is not None:
        notation, text = binding
        out += flag(notation == "rfc8599") + data(text)
    else:
        target = target or {}
        names = ["app", "token", "environment", "pushType", "endpoint", "tokenType", "platform"]
        mask = sum(1 << i for i, n in enumerate(names) if n in target) | (0x80 if keys else 0)
        out += byte(PROVIDERS.index(provider)) + byte(mask) + b"".join(data(target[n]) for n in names if n in target)
        if keys: out += data(keys[0]) + data(keys[1])
    return out + i64(kafka) + byte(attempt - 1) + i64(now)


def retry(retry_after="", now=EPOCH, created=EPOCH, ttl=30, attempt=1, seconds=0, base=1000, maximum=60_000, attempts=5,
          threshold=50, cooldown=30_000, jitter=2, breaker=()):
    out = data(retry_after) + i64(now) + i64(created) + i64(ttl) + i64(attempt) + i64(seconds) + ranged(-999_999_999_999_999_999, 0)
    out += ranged(1, base) + ranged(base, maximum) + ranged(1, attempts) + ranged(1, threshold) + ranged(100, cooldown) + byte(jitter)
    return out + b"".join(byte(op) + i64(clock) for op, clock in breaker)


def response(status, headers=(), body=b""):
    return (status & 0xFFFF).to_bytes(2, "big") + byte(len(headers)) + b"".join(data(n) + data(v) for n, v in headers) + body


def endpoint(url, text="", allow_private=False, allowed=(), answers=()):
    out = byte(int(allow_private) | len(allowed) << 1 | len(answers) << 3) + b"".join(data(h) for h in allowed)
    for answer in answers: out += flag(len(answer) == 16) + bytes(answer)
    return out + data(url) + data(text)


def reply_bulk(b): return byte(6) + data(b)


def retry_entry(fields, now=EPOCH):
    names = ["job", "key", "hasKey", "fallbackCreatedAt", "binding", "attempts", "reason", "httpStatus"]
    out = i64(now) + byte(4) + byte(2 * len(fields))
    for name, value in fields:
        out += flag(True) + byte(names.index(name)) + reply_bulk(value)
    return out


JOB = b'{"v":1,"id":"j1","kind":"call","userId":"u1","ttl":30,"targets":[{"bindingId":"b1","provider":"fcm","token":"t"}]}'
JOB_NO_CREATED = b'{"v":1,"id":"j2","kind":"message","userId":"u1","targets":[{"bindingId":"b1","provider":"proxy"}]}'
OUTCOME = b'{"v":1,"jobId":"j1","userId":"u1","bindingId":"b1","provider":"apns","app":"com.example.app","status":"delivered",' \
          b'"httpStatus":200,"providerMessageId":"m1","action":"none","attempts":1,"at":1795310000000}'
APNS_TEMPLATE = open("docs/templates/mizu/apns/default/default.mustache", "rb").read()
FCM_TEMPLATE = open("docs/templates/mizu/fcm/default/default.mustache", "rb").read()

SEEDS = {
    "retry-decisions": {
        "delay-seconds": retry("120"),
        "retry-after-huge": retry("99999999999999999"),
        "retry-after-date": retry("Fri, 31 Dec 9999 23:59:59 GMT"),
        "kafka-timestamp-near-min": retry("5", created=MIN + 5, ttl=60),
        "created-and-ttl-max": retry("", created=MAX, ttl=MAX, attempt=2),
        "attempt-max": retry("1", attempt=MAX),
        "now-or-never": retry("", ttl=0),
        "retry-after-date-far": retry("Fri, 31 Dec 999999999 23:59:59 GMT"),
        "decide-now-near-max": retry("10", now=MAX - 5, created=MAX, ttl=MAX),
        "held-back-now-near-max": retry("10", now=MAX - 5, created=MAX, ttl=MAX, attempt=5),
        "duration-max": retry("", seconds=MAX, jitter=1),
        "breaker-clock-near-max": retry("", attempts=3, threshold=1, breaker=[(1, MAX - 10), (0, MAX - 5), (0, MAX), (2, MAX), (0, MIN)]),
        "breaker-probe": retry("", threshold=2, breaker=[(1, EPOCH), (1, EPOCH), (0, EPOCH + 40_000), (0, EPOCH + 40_001), (3, EPOCH)]),
    },
    "webpush-proxy-responses": {
        "created": response(201, [("location", "https://push.example.net/m/1")]),
        "gone": response(410),
        "too-many-huge-retry-after": response(429, [("retry-after", "99999999999999999")]),
        "unavailable-date": response(503, [("retry-after", "Fri, 31 Dec 9999 23:59:59 GMT")]),
        "unavailable-seconds": response(503, [("retry-after", "120")], b'{"error":"later"}'),
        "proxy-ok": response(200, body=b"{}"),
        "vapid-refused": response(403, body=b"bad jwt"),
        "negative-status": response(-1, [("retry-after", "-5")]),
    },
    "endpoint-policy": {
        "nat64": endpoint("https://[64:ff9b::a00:1]/push/1", "64:ff9b::a00:1"),
        "mapped-loopback": endpoint("https://[::ffff:127.0.0.1]:8443/push", "::ffff:127.0.0.1"),
        "compatible": endpoint("https://[::a00:1]/push", "::a00:1"),
        "public-v4": endpoint("https://93.184.216.34/push", "93.184.216.34"),
        "name-to-private": endpoint("https://push.example.net/s/1", "10.0.0.1", answers=[[10, 0, 0, 1]]),
        "name-to-mixed": endpoint("https://push.example.net/s/1", "fe80::1", answers=[[93, 184, 216, 34], [0xfe, 0x80] + [0] * 13 + [1]]),
        "allowed-hosts": endpoint("https://fcm.googleapis.com/fcm/send/x", "", allowed=["googleapis.com"], answers=[[142, 250, 1, 1]]),
        "credentials": endpoint("https://user:pw@push.example.net/", "::1"),
        "http": endpoint("http://push.example.net/", "169.254.169.254"),
        "private-allowed": endpoint("https://[::1]/", "127.0.0.1", allow_private=True),
    },
    "headers": {
        "apns-collapse-injection": delivery(created=EPOCH, ttl=30, collapse="x\r\napns-push-type: voip", target={"token": TOKEN}) + byte(0) + i64(3600) + i64(EPOCH),
        "apns-kafka-timestamp-near-min": delivery(kind="message", kafka=MIN + 5, notification=("t", "b", None, 3), target={"token": TOKEN, "pushType": "alert"}) + byte(0) + i64(3600) + i64(EPOCH),
        "fcm-ios-created-max": delivery(kind="message", created=MAX, ttl=2_419_200, provider="fcm", target={"token": "t", "platform": "ios"}, fields={"callId": "c\r\n1"}) + byte(0) + i64(0) + i64(EPOCH),
        "webpush-vapid-lifetime-max": delivery(kind="wake", provider="webpush", collapse="not/base64url+", target={"endpoint": "https://push.example.net/s/1"}, keys=("k", "a")) + byte(0) + i64(MAX) + i64(MAX),
        "proxy-voip": delivery(kind="cancel", provider="proxy", body="opaque", target={"token": "t", "tokenType": "apnsVoip", "platform": "ios"}) + byte(0) + i64(60) + i64(MIN),
        "rfc8599-binding": delivery(binding=("rfc8599", f"pn-provider=apns;pn-param=DEF123GHIJ.com.example.chat.voip;pn-prid={TOKEN}"), now=MIN + 1) + byte(1) + i64(60) + i64(EPOCH),
    },
    "redis-url": {
        "plain": b"redis://localhost:6379/0",
        "credentials-v6": b"redis://user:p%40ss@[::1]:6380/2",
        "database-huge": b"redis://:pw@host/99999999999999999999",
        "port-zero": b"redis://host:0",
        "port-too-big": b"redis://host:65536",
        "empty-host": b"redis://:pw@/1",
    },
    "redis-records": {
        "entry": retry_entry([("job", JOB), ("fallbackCreatedAt", b"1795310000000"), ("binding", b"b1"), ("attempts", b"2"),
                              ("hasKey", b"1"), ("key", b"k"), ("reason", b"timeout"), ("httpStatus", b"503")]) + OUTCOME,
        "entry-kafka-timestamp-near-min": retry_entry([("job", JOB_NO_CREATED), ("fallbackCreatedAt", b"-9223372036854775800"),
                                                       ("binding", b"b1"), ("attempts", b"1")]),
        "entry-attempts-max": retry_entry([("job", JOB), ("fallbackCreatedAt", b"0"), ("binding", b"b1"), ("attempts", b"9223372036854775807")]),
        "entry-attempts-negative": retry_entry([("job", JOB), ("fallbackCreatedAt", b"0"), ("binding", b"b1"), ("attempts", b"-3")]),
        "outcome-extremes": i64(EPOCH) + byte(0) + OUTCOME.replace(b'"attempts":1', b'"attempts":9223372036854775807')
                            .replace(b'"httpStatus":200', b'"httpStatus":-9223372036854775808'),
    },
    "templates": {
        "apns-mizu": byte(0) + byte(0) + data(APNS_TEMPLATE) + delivery(created=EPOCH, ttl=30, fields={"from": 'Q "x"\\', "callId": "c1"}, target={"token": TOKEN}),
        "fcm-mizu": byte(1) + byte(1) + data(FCM_TEMPLATE) + delivery(kind="message", kafka=MIN + 5, provider="fcm", target={"token": "t"}, notification=("t\n", "b", "s", 2147483647)),
        "apns-sections": byte(0) + byte(3) + data('{"aps":{}{{#data}},"d":"{{callId}}"{{/data}}{{^BADGE}},"nb":1{{/BADGE}}}') + delivery(kind="custom", fields={"callId": "1"}, target={"token": TOKEN}),
        "fcm-bad-data": byte(1) + byte(0) + data('{"message":{"token":"{{TOKEN}}","data":{"n":{{TTLNUM}}}}}') + delivery(provider="fcm", created=MAX, ttl=60, target={"token": "t"}),
        "unclosed": byte(0) + byte(0) + data('{"aps":{}} {{#x}}'),
        # Large overrides (merging once took quadratic time): 9 000 generated members over 9 000, every other
        # name shared; and 3 000 members of JSON text over 3 000, with removals, nested merges and new members.
        "apns-override-generated-9000": byte(0) + byte(0) + data(APNS_TEMPLATE)
            + delivery(created=EPOCH, ttl=30, notification=("Bob", "b" * 3000, None, None), target={"token": TOKEN})
            + byte(1) + data("k") + generated(9000, step=1, offset=0, salt=0) + generated(9000, step=2, offset=0, salt=3) + byte(64),
        "fcm-override-json-3000": byte(1) + byte(1) + data(FCM_TEMPLATE)
            + delivery(kind="message", provider="fcm", notification=("t", "b" * 200, None, None), target={"token": "t"})
            + byte(0) + data(json_object(3000, lambda i: str(i))) + data(json_object(3000, merge_value, start=1500)) + byte(16),
    },
}

for target, seeds in SEEDS.items():
    directory = f"fuzz/corpus/{target}"
    os.makedirs(directory, exist_ok=True)
    for name, content in seeds.items():
        with open(f"{directory}/seed-{name}", "wb") as file:
            file.write(content)
