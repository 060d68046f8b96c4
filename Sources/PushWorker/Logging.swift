import Foundation
import Logging
import PushCore
import PushPipeline

public enum LogFormat: String, Sendable {
    case json, text
}

/// One JSON object per line on stderr: `ts`, `level`, `label`, `msg`, then the metadata. Lines below `notice`
/// leave in batches (`LogLineOutput`).
public struct JSONLogHandler: LogHandler {
    public var logLevel: Logger.Level = .info
    public var metadata: Logger.Metadata = [:]
    /// Metadata of the context a line is logged in (a traced job's `trace_id` and `span_id`), beneath the line's own.
    public var metadataProvider: Logger.MetadataProvider?
    private let label: String
    private let output: LogLineOutput

    public init(label: String, output: LogLineOutput = .standardError) {
        self.label = label
        self.output = output
    }

    public subscript(metadataKey key: String) -> Logger.Metadata.Value? {
        get { metadata[key] }
        set { metadata[key] = newValue }
    }

    public func log(event: LogEvent) {
        output.write(line(for: event, at: currentTimeMilliseconds()), urgent: event.level >= .notice)
    }

    /// The event as one JSON object and a newline: `ts`, `level`, `label`, `msg`, then the metadata
    /// (the event's over the handler's) in key order.
    func line(for event: LogEvent, at milliseconds: Int64) -> [UInt8] {
        let explicit = event.metadata
        var writer = JSONWriter(capacity: 256)
        writer.beginObject()
        writer.member("ts", iso8601: milliseconds)
        writer.member("level", event.level.rawValue)
        writer.member("label", label)
        writer.member("msg", event.message.description)
        var merged = metadata.isEmpty ? explicit ?? [:] : metadata.merging(explicit ?? [:]) { $1 }
        if let provided = metadataProvider?.get(), !provided.isEmpty { merged.merge(provided) { own, _ in own } }
        for (key, value) in merged.sorted(by: { $0.key < $1.key }) {
            if case .string(let text) = value { writer.member(key, text) } else { writer.member(key, "\(value)") }
        }
        writer.endObject()
        var bytes = writer.takeBytes()
        bytes.append(0x0A)
        return bytes
    }
}

extension JSONLogHandler: FinishedDeliveryLogging {
    public func logFinishedDelivery(_ outcome: Outcome) {
        guard metadata.isEmpty, metadataProvider == nil else {
            return log(
                event: LogEvent(
                    level: .info, message: FinishedDeliveryLog.message, metadata: FinishedDeliveryLog.metadata(of: outcome), source: nil,
                    file: #fileID, function: #function, line: #line))
        }
        output.write(finishedDeliveryLine(outcome, at: currentTimeMilliseconds()), urgent: false)
    }

    /// `line(for:at:)` of a finished delivery, its members written in key order without a dictionary.
    func finishedDeliveryLine(_ outcome: Outcome, at milliseconds: Int64) -> [UInt8] {
        var writer = JSONWriter(capacity: 320)
        writer.beginObject()
        writer.member("ts", iso8601: milliseconds)
        writer.member("level", Logger.Level.info.rawValue)
        writer.member("label", label)
        writer.member("msg", FinishedDeliveryLog.message.description)
        writer.member("app", outcome.app ?? "-")
        writer.member("attempts", String(outcome.attempts))
        writer.member("bindingId", outcome.bindingId)
        writer.member("httpStatus", outcome.httpStatus.map(String.init) ?? "-")
        writer.member("jobId", outcome.jobId)
        writer.member("provider", outcome.provider.rawValue)
        writer.member("reason", outcome.reason ?? "-")
        writer.member("status", outcome.status.rawValue)
        writer.endObject()
        var bytes = writer.takeBytes()
        bytes.append(0x0A)
        return bytes
    }
}

public enum LogSetup {
    /// Installs the process-wide log handler once. `metadataProvider`: what every line gets from the context it is
    /// logged in (`TraceExport.logMetadataProvider` while traces are exported).
    public static func bootstrap(format: LogFormat, level: Logger.Level, metadataProvider: Logger.MetadataProvider? = nil) {
        LoggingSystem.bootstrap(
            { label, provider in
                var handler: any LogHandler =
                    switch format {
                    case .json: JSONLogHandler(label: label)
                    case .text: StreamLogHandler.standardError(label: label, metadataProvider: provider)
                    }
                handler.logLevel = level
                handler.metadataProvider = provider
                return handler
            }, metadataProvider: metadataProvider)
    }
}
