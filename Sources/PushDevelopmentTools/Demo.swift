import APNsSandbox
import FCMSandbox
import Foundation
import HMSSandbox
import Logging
import ProxySandbox
import PushCore
import PushCrypto
import PushKafka
import PushKafkaMock
import PushPipeline
import PushSandbox
import PushWorker
import ServiceLifecycle
import WebPushSandbox

/// `push-worker-dev demo`: the whole pipeline on embedded parts — a Kafka mock cluster on
/// loopback, the provider sandboxes over HTTP/2 + TLS, a private `redis-server` when one is
/// installed — fed a handful of realistic jobs.
public enum Demo {
    /// What the demo shows: one row per outcome or dead letter, and each push-proxy request's endpoints.
    public struct Report: Sendable {
        public let rows: [Row]
        /// Per request to the push proxy: the job and the endpoints it carried.
        public let proxyRequests: [(jobId: String, endpoints: [String])]
        /// Samples left out, and why.
        public let skipped: [String]
    }

    public struct Row: Sendable {
        public let title: String
        public let jobId: String
        public let bindingId: String
        public let provider: String
        public let status: String
        public let action: String
        public let httpStatus: String
        public let attempts: String
        public let reason: String
    }

    struct SampleJob {
        let title: String
        let id: String
        let key: String
        let json: String
        let expectedMessages: Int
        /// Only with a shared store: the retry queue lets a cancel pass its waiting call.
        var needsRedis = false
    }

    static func samples(now: Int64, browser: WebPushSandbox.Subscription) -> [SampleJob] {
        func job(
            _ id: String, kind: String, user: String, ttl: Int = 60, createdAt: Int64? = nil, extra: String = "",
            targets: String
        ) -> String {
            """
            {"v":1,"id":"\(id)","createdAt":\(createdAt ?? now),"ttl":\(ttl),"kind":"\(kind)","userId":"\(user)",\(extra)"targets":[\(targets)]}
            """
        }
        let voip =
            #"{"bindingId":"alice-iphone","provider":"proxy","token":"a1b2c3d4e5f6","tokenType":"apnsVoip","platform":"ios","pushType":"voip"}"#
        let apnsVoip =
            #"{"bindingId":"bob-iphone","provider":"apns","app":"com.example.chat","token":"\#(String(repeating: "b0", count: 32))","environment":"production","pushType":"voip"}"#
        let rfc8599Voip =
            #"{"bindingId":"ivan-iphone","rfc8599":"pn-provider=apns;pn-param=\#(APNsSandboxInstance.teamId).\#(APNsSandboxInstance.bundleId).voip;pn-prid=\#(String(repeating: "d2", count: 32))"}"#
        let unboundPixel = #"{"bindingId":"ivan-old-pixel","xmpush":"a:example-project:null"}"#
        let teamlessRFC8599 =
            #"{"bindingId":"ivan-ipad","rfc8599":"pn-provider=apns;pn-param=\#(APNsSandboxInstance.bundleId).voip;pn-prid=\#(String(repeating: "e3", count: 32))"}"#
        let bareNull = #"{"bindingId":"ivan-desk-phone","xmpush":"null"}"#
        // Linphone's iOS registration: a PushKit token for calls and a remote token for everything else, in one binding.
        let linphoneDual =
            #"{"bindingId":"leo-iphone","rfc8599":"pn-provider=apns.dev;pn-param=\#(APNsSandboxInstance.teamId).\#(APNsSandboxInstance.bundleId).voip&remote;pn-prid=\#(String(repeating: "a7", count: 32)):voip&\#(String(repeating: "b8", count: 32)):remote"}"#
        // liblinphone's Contact as its iOS SDK writes it (src/account/account.cpp, src/push-notification/push-notification-config.cpp):
        // its placeholder team id ABCD1234, upper-case hex tokens each with its service, and its own pn-* parameters.
        let liblinphone =
            #"{"bindingId":"mia-iphone","rfc8599":"pn-prid=\#(String(repeating: "C9", count: 32)):voip&\#(String(repeating: "D0", count: 32)):remote;pn-provider=apns;pn-param=ABCD1234.\#(APNsSandboxInstance.bundleId).voip&remote;pn-silent=1;pn-timeout=0;pn-msg-str=IM_MSG;pn-call-str=IC_MSG;pn-groupchat-str=GC_MSG;pn-call-snd=notes_of_the_optimistic.caf;pn-msg-snd=msg.caf"}"#
        let ringingPhone = #"{"bindingId":"kate-phone","provider":"proxy","token":"kate-voip-1","tokenType":"apnsVoip","platform":"ios"}"#
        let fcmAndroid = #"{"bindingId":"frank-pixel","provider":"fcm","app":"example-project","token":"fcm-frank-1","platform":"android"}"#
        let fcmGone = #"{"bindingId":"old-tablet","provider":"fcm","token":"unregistered-tablet-7","platform":"android"}"#
        let browserTarget =
            #"{"bindingId":"grace-firefox","provider":"webpush","endpoint":"\#(browser.endpoint)","keys":{"p256dh":"\#(browser.p256dh)","auth":"\#(browser.auth)"}}"#
        let apnsGone =
            #"{"bindingId":"old-ipad","provider":"apns","token":"0410\#(String(repeating: "c1", count: 30))","environment":"sandbox"}"#
        let android = #"{"bindingId":"alice-pixel","provider":"proxy","token":"fcm-token-123","tokenType":"fcm","platform":"android"}"#
        let huaweiPhone = #"{"bindingId":"judy-mate","provider":"hms","app":"\#(HMSSandboxInstance.appId)","token":"IQAAAACy0kYkAAAjudy"}"#
        let frankIPhone =
            #"{"bindingId":"frank-iphone","provider":"apns","app":"com.example.chat","token":"\#(String(repeating: "f4", count: 32))","environment":"production"}"#
        let frankActivity =
            #"{"bindingId":"frank-iphone-activity","provider":"apns","app":"com.example.chat","token":"\#(String(repeating: "f5", count: 32))","environment":"production","pushType":"liveactivity"}"#
        let huaweiGone =
            #"{"bindingId":"judy-old-p30","provider":"hms","app":"\#(HMSSandboxInstance.appId)","token":"invalid-IQAAAACy0old"}"#
        return [
            SampleJob(
                title: "incoming call", id: "call-1", key: "alice",
                json: job(
                    "call-1", kind: "call", user: "alice", ttl: 30,
                    extra: #""priority":"high","data":{"callId":"c-77","caller":"bob"},"#, targets: voip + "," + android),
                expectedMessages: 2),
            SampleJob(
                title: "VoIP call via APNs", id: "call-3", key: "bob",
                json: job(
                    "call-3", kind: "call", user: "bob", ttl: 30, extra: #""data":{"callId":"c-90","caller":"carol"},"#,
                    targets: apnsVoip), expectedMessages: 1),
            SampleJob(
                title: "SIP call to RFC 8599 / X-MPUSH bindings", id: "call-4", key: "ivan",
                json: job(
                    "call-4", kind: "call", user: "ivan", ttl: 30,
                    extra: #""data":{"callId":"a84b4c76e66710@pc33","caller":"Alice","callerUsername":"1111"},"#,
                    targets: [rfc8599Voip, teamlessRFC8599, unboundPixel, bareNull].joined(separator: ",")),
                expectedMessages: 4),
            SampleJob(
                title: "Linphone dual binding rings (call → its VoIP token)", id: "call-7", key: "leo",
                json: job(
                    "call-7", kind: "call", user: "leo", ttl: 30, extra: #""data":{"callId":"c-93","caller":"ivan"},"#,
                    targets: linphoneDual), expectedMessages: 1),
            SampleJob(
                title: "message to the Linphone dual binding (→ its remote token)", id: "msg-10", key: "leo",
                json: job(
                    "msg-10", kind: "message", user: "leo", extra: #""notification":{"title":"Ivan","body":"Call me back"},"#,
                    targets: linphoneDual), expectedMessages: 1),
            SampleJob(
                title: "liblinphone registration as it writes it rings", id: "call-8", key: "mia",
                json: job(
                    "call-8", kind: "call", user: "mia", ttl: 30, extra: #""data":{"callId":"c-94","caller":"leo"},"#,
                    targets: liblinphone), expectedMessages: 1),
            SampleJob(
                title: "VoIP call via Huawei Push Kit", id: "call-5", key: "judy",
                json: job(
                    "call-5", kind: "call", user: "judy", ttl: 30, extra: #""data":{"callId":"c-91","caller":"ivan"},"#,
                    targets: huaweiPhone + "," + huaweiGone), expectedMessages: 2),
            SampleJob(
                title: "app deleted (APNs 410)", id: "msg-5", key: "bob",
                json: job(
                    "msg-5", kind: "message", user: "bob", extra: #""notification":{"title":"Carol","body":"Hi"},"#,
                    targets: apnsGone), expectedMessages: 1),
            SampleJob(
                title: "chat message via FCM", id: "msg-6", key: "frank",
                json: job(
                    "msg-6", kind: "message", user: "frank",
                    extra: #""collapseKey":"chat-7","notification":{"title":"Erin","body":"Hello"},"data":{"chatId":"7"},"#,
                    targets: fcmAndroid + "," + fcmGone), expectedMessages: 2),
            SampleJob(
                title: "message to a browser (Web Push)", id: "msg-7", key: "grace",
                json: job(
                    "msg-7", kind: "message", user: "grace",
                    extra: #""collapseKey":"chat-9","notification":{"title":"Frank","body":"See you"},"#,
                    targets: browserTarget), expectedMessages: 1),
            SampleJob(
                title: "rich chat message", id: "msg-8", key: "frank",
                json: job(
                    "msg-8", kind: "message", user: "frank",
                    extra:
                        ##""collapseKey":"chat-8","notification":{"title":"Erin","subtitle":"Lunch crew","body":"Pizza at 12?","sound":"message.caf","badge":2,"threadId":"chat-7","category":"MESSAGE_REPLY","interruptionLevel":"active","image":"https://cdn.example.com/pizza.jpg","channelId":"messages","tag":"chat-7","color":"#1e88e5"},"data":{"chatId":"7"},"overrides":{"fcm":{"message":{"android":{"direct_boot_ok":true}}}},"##,
                    targets: frankIPhone + "," + fcmAndroid), expectedMessages: 2),
            SampleJob(
                title: "localized missed-call alert", id: "msg-9", key: "frank",
                json: job(
                    "msg-9", kind: "message", user: "frank",
                    extra:
                        #""notification":{"titleLocKey":"MISSED_CALL_TITLE","locKey":"MISSED_CALL_BODY","locArgs":["Erin"],"interruptionLevel":"time-sensitive"},"#,
                    targets: frankIPhone), expectedMessages: 1),
            SampleJob(
                title: "Live Activity update (ongoing call)", id: "act-1", key: "frank",
                json: job(
                    "act-1", kind: "custom", user: "frank",
                    extra:
                        #""notification":{"title":"Call with Erin","body":"00:42"},"liveActivity":{"event":"update","contentState":{"status":"connected","seconds":42},"staleDate":4102444800},"#,
                    targets: frankActivity), expectedMessages: 1),
            SampleJob(
                title: "caller redials within 5 s", id: "call-1b", key: "alice",
                json: job(
                    "call-1b", kind: "call", user: "alice", ttl: 30,
                    extra: #""data":{"callId":"c-78","caller":"bob"},"#, targets: voip),
                expectedMessages: 1),
            SampleJob(
                title: "chat message", id: "msg-1", key: "alice",
                json: job(
                    "msg-1", kind: "message", user: "alice", ttl: 3600,
                    extra: #""collapseKey":"chat-42","notification":{"title":"Bob","body":"Lunch?"},"#, targets: android),
                expectedMessages: 1),
            SampleJob(
                title: "call cancelled", id: "cancel-1", key: "alice",
                json: job("cancel-1", kind: "cancel", user: "alice", ttl: 30, extra: #""data":{"callId":"c-77"},"#, targets: voip),
                expectedMessages: 1),
            SampleJob(
                title: "call refused for now, then cancelled", id: "call-6", key: "ringing-kate",
                json: job(
                    "call-6", kind: "call", user: "ringing-kate", ttl: 30, extra: #""collapseKey":"call-k1","data":{"callId":"k1"},"#,
                    targets: ringingPhone), expectedMessages: 1, needsRedis: true),
            SampleJob(
                title: "the caller hangs up", id: "cancel-2", key: "ringing-kate",
                json: job(
                    "cancel-2", kind: "cancel", user: "ringing-kate", ttl: 30, extra: #""collapseKey":"call-k1","data":{"callId":"k1"},"#,
                    targets: ringingPhone), expectedMessages: 1, needsRedis: true),
            SampleJob(
                title: "user unknown to the proxy", id: "msg-2", key: "unknown-carol",
                json: job(
                    "msg-2", kind: "message", user: "unknown-carol",
                    targets: #"{"bindingId":"carol-web","provider":"proxy","platform":"web"}"#),
                expectedMessages: 1),
            SampleJob(
                title: "proxy keeps answering 503", id: "msg-3", key: "busy-dave",
                json: job(
                    "msg-3", kind: "message", user: "busy-dave",
                    targets: #"{"bindingId":"dave-ipad","provider":"proxy","tokenType":"apns","token":"ffee","platform":"ios"}"#),
                expectedMessages: 2),
            SampleJob(
                title: "stale call (TTL passed)", id: "call-2", key: "erin",
                json: job(
                    "call-2", kind: "call", user: "erin", ttl: 30, createdAt: now - 3_600_000,
                    targets: #"{"bindingId":"erin-phone","provider":"proxy","pushType":"voip"}"#),
                expectedMessages: 1),
            SampleJob(
                title: "malformed JSON", id: "-", key: "mallory",
                json: #"{"v":1,"id":"broken","kind":"call","targets":["#, expectedMessages: 1),
            SampleJob(
                title: "unknown provider", id: "msg-4", key: "heidi",
                json: job("msg-4", kind: "message", user: "heidi", targets: #"{"bindingId":"frank-pager","provider":"pager"}"#),
                expectedMessages: 1),
        ]
    }

    public static func run(logger: Logger) async throws -> Report {
        let cluster = try MockKafkaCluster(brokers: 1, logger: logger)
        let jobsTopic = "push.jobs", outcomesTopic = "push.outcomes", dlqTopic = "push.dlq"
        try cluster.createTopic(jobsTopic, partitions: 4)
        try cluster.createTopic(outcomesTopic, partitions: 4)
        try cluster.createTopic(dlqTopic, partitions: 1)

        let tls = try SandboxTLS.make()
        defer { tls.remove() }
        let proxy = try await SandboxServer.start(tls: tls, responder: ProxySandbox.respond)
        let redis = RedisServerProcess.isInstalled ? try await RedisServerProcess.launch() : nil
        defer { redis?.stop() }
        let apns = try await APNsSandboxInstance.start(tls: tls)
        let fcm = try await FCMSandboxInstance.start(tls: tls)
        let hms = try await HMSSandboxInstance.start(tls: tls)
        let webPush = try await WebPushSandboxInstance.start(tls: tls)
        let vapidKeyFile = tls.directory.appendingPathComponent("vapid.pem").path
        try PrivateKey.generateP256().pem().write(toFile: vapidKeyFile, atomically: true, encoding: .utf8)

        let environment = [
            "PUSH_KAFKA_BROKERS": cluster.bootstrapServers,
            "PUSH_KAFKA_GROUP_ID": "push-worker-demo",
            "PUSH_PROXY_URL": proxy.baseURL + ProxySandbox.path,
            "PUSH_PROXY_CA_FILE": tls.caFile,
            "PUSH_APNS_CA_FILE": tls.caFile,
            "PUSH_FCM_CA_FILE": tls.caFile,
            "PUSH_HMS_CA_FILE": tls.caFile,
            "PUSH_WEBPUSH_VAPID_KEY_FILE": vapidKeyFile,
            "PUSH_WEBPUSH_VAPID_SUBJECT": "mailto:push-demo@example.com",
            "PUSH_WEBPUSH_CA_FILE": tls.caFile,
            "PUSH_WEBPUSH_ALLOWED_NETWORKS": "127.0.0.0/8,::1/128",
            "PUSH_WEBPUSH_ALLOWED_PORTS": String(webPush.server.port),
            "PUSH_RETRY_BASE_MS": "100",
            "PUSH_RETRY_MAX_MS": "400",
            "PUSH_MAX_ATTEMPTS": "3",
            "PUSH_SHUTDOWN_GRACE_S": "5",
            "PUSH_RDKAFKA_SESSION_TIMEOUT_MS": "6000",
            "PUSH_RDKAFKA_HEARTBEAT_INTERVAL_MS": "1000",
            "PUSH_REDIS_URL": redis?.urlString,
        ].compactMapValues { $0 }.merging(apns.workerEnvironment) { $1 }.merging(fcm.workerEnvironment) { $1 }.merging(
            hms.workerEnvironment
        ) { $1 }
        let configuration = try WorkerConfiguration.load(from: environment).get()
        let worker = try Worker(configuration: configuration, logger: logger)
        let reader = try KafkaTopicReader(
            bootstrapServers: cluster.bootstrapServers, topics: [outcomesTopic, dlqTopic],
            logger: logger)
        let all = samples(now: currentTimeMilliseconds(), browser: try webPush.sandbox.subscribe())
        let samples = all.filter { redis != nil || !$0.needsRedis }
        let skipped =
            redis == nil
            ? all.filter(\.needsRedis).map { "\($0.title): needs redis-server (scripts/install-deps.sh --demo)" } : []
        try await worker.producer.send(
            samples.map {
                KafkaRecord(topic: jobsTopic, key: Array($0.key.utf8), value: Array($0.json.utf8))
            })

        let services = worker.serviceGroup()
        let running = Task { try await services.run() }
        let expected = samples.reduce(0) { $0 + $1.expectedMessages }
        let messages = await reader.wait(timeout: .seconds(60)) { $0.count >= expected }
        await services.triggerGracefulShutdown()
        try await running.value
        reader.stop()
        await proxy.stop()
        await apns.server.stop()
        await fcm.server.stop()
        await hms.server.stop()
        await webPush.server.stop()

        guard messages.count >= expected else {
            throw DemoError(message: "only \(messages.count) of \(expected) outcomes arrived within 60 s")
        }
        let proxyRequests = proxy.requests.compactMap { request -> (jobId: String, endpoints: [String])? in
            guard let document = try? JSONParser.parse(request.body), case .array(let endpoints)? = document["endpointData"] else {
                return nil
            }
            let ids = endpoints.compactMap { if case .string(let id)? = $0["endpointId"] { id } else { nil } }
            let jobId = samples.first { sample in ids.contains { sample.json.contains("\"bindingId\":\"\($0)\"") } }?.id ?? "-"
            return (jobId, ids)
        }
        return Report(rows: rows(for: messages, samples: samples), proxyRequests: proxyRequests, skipped: skipped)
    }

    static func rows(for messages: [KafkaMessage], samples: [SampleJob]) -> [Row] {
        var rows: [Row] = []
        for message in messages {
            if message.topicPartition.topic == "push.dlq" {
                let header = { (name: String) in
                    message.headers.first { $0.name == name }.map { String(decoding: $0.value, as: UTF8.self) } ?? "-"
                }
                let key = message.key.map { String(decoding: $0, as: UTF8.self) } ?? "-"
                let title = samples.first { $0.key == key }?.title ?? "-"
                rows.append(
                    Row(
                        title: title, jobId: "-", bindingId: "-", provider: "-", status: "→ DLQ",
                        action: header(OutcomePublisher.codeHeader),
                        httpStatus: "-", attempts: "-", reason: header(OutcomePublisher.reasonHeader)))
                continue
            }
            guard let outcome = try? JSONParser.parse(message.value) else { continue }
            func text(_ name: String) -> String {
                switch outcome[name] {
                case .string(let value)?: value
                case .integer(let value)?: String(value)
                default: "-"
                }
            }
            let jobId = text("jobId")
            rows.append(
                Row(
                    title: samples.first { $0.id == jobId }?.title ?? "-", jobId: jobId, bindingId: text("bindingId"),
                    provider: text("provider"), status: text("status"), action: text("action"), httpStatus: text("httpStatus"),
                    attempts: text("attempts"), reason: text("reason")))
        }
        let order = samples.map(\.title)
        func sortKey(_ row: Row) -> (Int, Int, String) {
            (order.firstIndex(of: row.title) ?? 99, row.status == "→ DLQ" ? 1 : 0, row.bindingId)
        }
        return rows.sorted { sortKey($0) < sortKey($1) }
    }

    /// The outcome table, then the push-proxy requests with more than one endpoint, then skipped samples.
    public static func text(_ report: Report) -> String {
        var lines = [table(report.rows)]
        let shared = report.proxyRequests.filter { $0.endpoints.count > 1 }
        if !shared.isEmpty {
            lines.append("")
            lines.append(
                "push proxy: \(report.proxyRequests.count) requests for \(report.proxyRequests.map(\.endpoints.count).reduce(0, +)) endpoints; one request per job and user:"
            )
            lines += shared.map { "  \($0.jobId): endpointData [\($0.endpoints.joined(separator: ", "))]" }
        }
        if !report.skipped.isEmpty {
            lines.append("")
            lines += report.skipped.map { "skipped: \($0)" }
        }
        return lines.joined(separator: "\n")
    }

    public static func table(_ rows: [Row]) -> String {
        let header = ["job", "id", "binding", "provider", "status", "action", "http", "tries", "reason"]
        let cells = rows.map {
            [$0.title, $0.jobId, $0.bindingId, $0.provider, $0.status, $0.action, $0.httpStatus, $0.attempts, $0.reason]
        }
        let widths = header.indices.map { column in
            ([header[column]] + cells.map { $0[column] }).map(\.count).max() ?? 0
        }
        func line(_ values: [String]) -> String {
            values.enumerated().map { $1.padding(toLength: widths[$0], withPad: " ", startingAt: 0) }.joined(separator: "  ")
                .trimmingCharacters(in: .whitespaces)
        }
        return ([line(header), line(widths.map { String(repeating: "-", count: $0) })] + cells.map(line)).joined(separator: "\n")
    }
}

public struct DemoError: Error, CustomStringConvertible {
    public let message: String
    public var description: String { message }
}
