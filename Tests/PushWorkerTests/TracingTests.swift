import Foundation
import Logging
import OTel
import PushCore
import PushKafka
import ServiceLifecycle
import TestSupport
import Testing
import Tracing

@testable import PushPipeline
@testable import PushWorker

@Suite("Traces through Kafka: a job's traceparent is continued and passed on to its outcomes")
struct TracingTests {
    static let traceID = "4bf92f3577b34da6a3ce929d0e0e4736"
    static let parentSpanID = "00f067aa0ba902b7"

    private static func hex(_ bytes: [UInt8]) -> String { bytes.map { String(format: "%02x", $0) }.joined() }

    @Test(
        "a job with a traceparent yields CONSUMER, CLIENT and PRODUCER spans in its trace, exported over OTLP/HTTP, and its outcome carries the PRODUCER span's traceparent"
    )
    func jobContinuesItsTrace() async throws {
        let kafka = try KafkaFixture(partitions: 1)
        let sandbox = try await ProxySandboxFixture.start()
        let receiver = try await OTLPReceiver.start()
        var environment = [
            "PUSH_KAFKA_BROKERS": kafka.cluster.bootstrapServers, "PUSH_PROXY_URL": sandbox.url,
            "PUSH_PROXY_CA_FILE": sandbox.tls.caFile, "PUSH_HTTP_PORT": "0",
        ]
        for (name, value) in kafka.fastGroupProperties {
            environment["PUSH_RDKAFKA_" + name.uppercased().replacingOccurrences(of: ".", with: "_")] = value
        }
        let configuration = try WorkerConfiguration.load(from: environment).get()
        var traces = TraceExport.baseConfiguration(logger: testLogger())
        traces.traces.otlpExporter.endpoint = receiver.endpoint
        traces.traces.batchSpanProcessor.scheduleDelay = .milliseconds(100)
        let worker = try Worker(configuration: configuration, logger: testLogger(), traceConfiguration: traces)
        let group = worker.serviceGroup()
        let running = Task { try await group.run() }

        let producer = try kafka.producer()
        try await producer.send([
            KafkaRecord(
                topic: kafka.jobsTopic, key: Array("alice".utf8), value: jobJSON(id: "traced", targets: [proxyTarget("t1")]),
                headers: [KafkaHeader("traceparent", "00-\(Self.traceID)-\(Self.parentSpanID)-01")])
        ])
        producer.close()
        let reader = try kafka.reader(topics: [kafka.outcomesTopic])
        let outcomes = await reader.wait(timeout: .seconds(30)) { !$0.isEmpty }
        reader.stop()
        var spans: [OTLPReceiver.ReceivedSpan] = []
        for _ in 0..<100 {
            spans = receiver.spans.filter { Self.hex($0.traceID) == Self.traceID }
            if Set(spans.map(\.kind)).isSuperset(of: [.consumer, .client, .producer]) { break }
            try await Task.sleep(for: .milliseconds(100))
        }
        await group.triggerGracefulShutdown()
        try await running.value
        await receiver.stop()
        await sandbox.stop()

        #expect(outcomes.first?.json?["status"] == .string("delivered"))
        let consumer = try #require(spans.first { $0.kind == .consumer }, "no CONSUMER span in the trace: \(spans)")
        #expect(Self.hex(consumer.parentSpanID) == Self.parentSpanID)
        #expect(consumer.name == "process push.jobs")
        #expect(consumer.attributes["messaging.system"] == "kafka")
        #expect(consumer.attributes["messaging.destination.name"] == "push.jobs")
        #expect(consumer.attributes["messaging.kafka.offset"] == "0")
        #expect(consumer.attributes["messaging.kafka.message.key"] == "alice")
        #expect(consumer.attributes["messaging.consumer.group.name"] == "push-worker")
        let client = try #require(spans.first { $0.kind == .client && $0.name.hasPrefix("POST") }, "no CLIENT span for the request")
        #expect(client.parentSpanID == consumer.spanID)
        #expect(client.attributes["push.provider"] == "proxy")
        #expect(client.attributes["http.response.status_code"] == "200")
        #expect(client.attributes["push.outcome.status"] == "delivered")
        #expect(spans.contains { $0.kind == .client && $0.name == "redis prepare" && $0.parentSpanID == consumer.spanID })
        let producerSpan = try #require(spans.first { $0.kind == .producer }, "no PRODUCER span")
        #expect(producerSpan.parentSpanID == consumer.spanID)
        #expect(producerSpan.name == "send push.outcomes")
        #expect(outcomes.first?.header("traceparent") == "00-\(Self.traceID)-\(Self.hex(producerSpan.spanID))-01")
    }

    @Test(
        "trace export is on only when the OTEL_ variables ask for it; OTLP over gRPC, or an exporter or protocol this build lacks, is refused with one line each"
    )
    func requestedOnlyByTheVariables() {
        #expect((try? TraceExport.requested(by: [:]).get()) == false)
        #expect((try? TraceExport.requested(by: ["OTEL_EXPORTER_OTLP_ENDPOINT": "http://collector:4318"]).get()) == true)
        #expect((try? TraceExport.requested(by: ["OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http://collector:4318/v1/traces"]).get()) == true)
        #expect((try? TraceExport.requested(by: ["OTEL_TRACES_EXPORTER": "otlp"]).get()) == true)
        #expect(
            (try? TraceExport.requested(by: ["OTEL_TRACES_EXPORTER": "none", "OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4318"]).get())
                == false)
        #expect((try? TraceExport.requested(by: ["OTEL_SDK_DISABLED": "true", "OTEL_TRACES_EXPORTER": "otlp"]).get()) == false)
        guard case .failure(let errors) = TraceExport.requested(by: ["OTEL_EXPORTER_OTLP_PROTOCOL": "grpc"]) else {
            Issue.record("grpc was accepted")
            return
        }
        #expect(
            errors.problems == [
                "OTEL_EXPORTER_OTLP_PROTOCOL=grpc is not supported: this build exports OTLP over HTTP (http/protobuf, the default, or http/json)"
            ])
    }

    @Test(
        "OTEL_TRACES_SAMPLER takes the specification's samplers this build has, with a ratio from 0 to 1; Jaeger, X-Ray or a bad ratio is one line"
    )
    func samplers() {
        for sampler in TraceExport.samplers {
            #expect((try? TraceExport.requested(by: ["OTEL_TRACES_SAMPLER": sampler, "OTEL_TRACES_EXPORTER": "otlp"]).get()) == true)
        }
        #expect(
            (try? TraceExport.requested(by: ["OTEL_TRACES_SAMPLER": "parentbased_traceidratio", "OTEL_TRACES_SAMPLER_ARG": "0.25"]).get())
                == false)
        #expect(
            TraceExport.samplerProblems(["OTEL_TRACES_SAMPLER": "parentbased_jaeger_remote"]) == [
                "OTEL_TRACES_SAMPLER must be one of always_on, always_off, traceidratio, parentbased_always_on, parentbased_always_off, parentbased_traceidratio, got \"parentbased_jaeger_remote\""
            ])
        #expect(TraceExport.samplerProblems(["OTEL_TRACES_SAMPLER": "xray"]).count == 1)
        #expect(
            TraceExport.samplerProblems(["OTEL_TRACES_SAMPLER": "traceidratio", "OTEL_TRACES_SAMPLER_ARG": "1.5"]) == [
                "OTEL_TRACES_SAMPLER_ARG must be a probability from 0 to 1 for traceidratio, got \"1.5\""
            ])
    }

    @Test(
        "a producer's trace headers go on only as W3C Trace Context lets a vendor pass them: a traceparent that parses, a tracestate of at most 512 bytes and 32 members"
    )
    func inboundTraceHeadersAreBounded() throws {
        let extractor = KafkaHeadersExtractor()
        let parent = "00-\(Self.traceID)-\(Self.parentSpanID)-01"
        func read(_ name: String, _ value: String) -> String? { extractor.extract(key: name, from: [KafkaHeader(name, value)]) }
        #expect(read("traceparent", parent) == parent)
        #expect(read("TraceParent", parent) == parent)
        #expect(read("traceparent", "01-\(Self.traceID)-\(Self.parentSpanID)-01-later-field") != nil)
        for broken in [
            "00-\(Self.traceID)-\(Self.parentSpanID)-01-extra", "ff-\(Self.traceID)-\(Self.parentSpanID)-01",
            "00-\(String(repeating: "0", count: 32))-\(Self.parentSpanID)-01", "00-\(Self.traceID)-0000000000000000-01",
            "00-\(Self.traceID.uppercased())-\(Self.parentSpanID)-01", "garbage", parent + String(repeating: "x", count: 1_000_000),
        ] {
            #expect(read("traceparent", broken) == nil, "\(broken.prefix(80))")
        }
        let members = (1...32).map { "v\($0)=x" }.joined(separator: ",")
        #expect(read("tracestate", members) == members)
        #expect(read("tracestate", members + ",v33=x") == nil)
        #expect(read("tracestate", "v=" + String(repeating: "a", count: 510)) != nil)
        #expect(read("tracestate", "v=" + String(repeating: "a", count: 511)) == nil)
        #expect(read("tracestate", "v=" + String(repeating: "a", count: 1 << 20)) == nil)
        #expect(read("tracestate", "v=a\nb") == nil)
    }

    @Test("a producer's oversized tracestate reaches no outcome: the job's trace goes on without it")
    func oversizedTraceStateStopsAtTheWorker() throws {
        var configuration = TraceExport.baseConfiguration(logger: testLogger())
        configuration.traces.exporter = .none
        let tracing = try TraceExport(configuration: configuration, consumerGroup: "g").tracing
        func outboundHeaders(tracestate: String) -> [String: String] {
            let message = KafkaMessage(
                topicPartition: TopicPartition(topic: "push.jobs", partition: 0), offset: 0, key: nil, value: [], timestamp: nil,
                headers: [KafkaHeader("traceparent", "00-\(Self.traceID)-\(Self.parentSpanID)-01"), KafkaHeader("tracestate", tracestate)])
            let span = tracing.consumerSpan(of: message)
            defer { span.end() }
            return Dictionary(
                tracing.headers(carrying: span.context).map { ($0.name, String(decoding: $0.value, as: UTF8.self)) }
            ) { $1 }
        }
        let small = outboundHeaders(tracestate: "vendor=abc")
        #expect(small["tracestate"] == "vendor=abc")
        #expect(small["traceparent"]?.contains(Self.traceID) == true)
        let huge = outboundHeaders(tracestate: "vendor=" + String(repeating: "a", count: 1 << 20))
        #expect(huge["tracestate"] == nil)
        #expect(huge["traceparent"]?.contains(Self.traceID) == true)
    }

    @Test("a JSON log line written while a traced job runs carries its trace_id and span_id")
    func logLinesCarryTheTrace() throws {
        var configuration = TraceExport.baseConfiguration(logger: testLogger())
        configuration.traces.exporter = .none
        let export = try TraceExport(configuration: configuration, consumerGroup: "g")
        var handler = JSONLogHandler(label: "t")
        handler.metadataProvider = TraceExport.logMetadataProvider
        var parent = ServiceContext.topLevel
        export.tracing.tracer.extract(
            [KafkaHeader("traceparent", "00-\(Self.traceID)-\(Self.parentSpanID)-01")], into: &parent,
            using: KafkaHeadersExtractor())
        let span = export.tracing.tracer.startSpan("job", context: parent, ofKind: .consumer)
        let line = ServiceContext.withValue(span.context) {
            handler.line(
                for: LogEvent(level: .info, message: "delivery finished", metadata: [:], source: nil, file: "", function: "", line: 0),
                at: 0)
        }
        span.end()
        let text = String(decoding: line, as: UTF8.self)
        #expect(text.contains(#""trace_id":"\#(Self.traceID)""#))
        #expect(text.contains(#""span_id":""#))
        let untraced = String(
            decoding: handler.line(
                for: LogEvent(level: .info, message: "m", metadata: [:], source: nil, file: "", function: "", line: 0), at: 0),
            as: UTF8.self)
        #expect(!untraced.contains("trace_id"))
    }
}
