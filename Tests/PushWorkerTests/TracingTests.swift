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
