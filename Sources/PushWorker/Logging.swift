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
        writer.member("ts", LogTimestamp.iso8601(millisecondsSinceEpoch: milliseconds))
        writer.member("level", event.level.rawValue)
        writer.member("label", label)
        writer.member("msg", event.message.description)
        let merged = metadata.isEmpty ? explicit ?? [:] : metadata.merging(explicit ?? [:]) { $1 }
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
        guard metadata.isEmpty else {
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
        writer.member("ts", LogTimestamp.iso8601(millisecondsSinceEpoch: milliseconds))
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

/// The `ts` of a JSON log line: UTC with milliseconds, `2026-11-24T02:39:36.820Z`. Written digit by
/// digit: Foundation's `ISO8601DateFormatter.string(from:timeZone:formatOptions:)` builds a formatter on
/// every call, which made logging one line per delivery cost more CPU than the delivery itself.
public enum LogTimestamp {
    public static func iso8601(millisecondsSinceEpoch milliseconds: Int64) -> String {
        let (days, millisecondOfDay) = floorDivision(milliseconds, 86_400_000)
        let (year, month, day) = CivilDate.date(daysSinceEpoch: days)
        var bytes: [UInt8] = []
        bytes.reserveCapacity(24)
        func digits(_ value: Int64, _ count: Int) {
            var divisor: Int64 = 1
            for _ in 1..<count { divisor *= 10 }
            var rest = value
            while divisor > 0 {
                bytes.append(UInt8(ascii: "0") + UInt8(rest / divisor))
                rest %= divisor
                divisor /= 10
            }
        }
        digits(year, 4)
        bytes.append(UInt8(ascii: "-"))
        digits(month, 2)
        bytes.append(UInt8(ascii: "-"))
        digits(day, 2)
        bytes.append(UInt8(ascii: "T"))
        digits(millisecondOfDay / 3_600_000, 2)
        bytes.append(UInt8(ascii: ":"))
        digits(millisecondOfDay / 60_000 % 60, 2)
        bytes.append(UInt8(ascii: ":"))
        digits(millisecondOfDay / 1000 % 60, 2)
        bytes.append(UInt8(ascii: "."))
        digits(millisecondOfDay % 1000, 3)
        bytes.append(UInt8(ascii: "Z"))
        return String(decoding: bytes, as: UTF8.self)
    }

    private static func floorDivision(_ value: Int64, _ divisor: Int64) -> (quotient: Int64, remainder: Int64) {
        let remainder = value % divisor
        return remainder < 0 ? (value / divisor - 1, remainder + divisor) : (value / divisor, remainder)
    }
}

public enum LogSetup {
    /// Installs the process-wide log handler once.
    public static func bootstrap(format: LogFormat, level: Logger.Level) {
        LoggingSystem.bootstrap { label in
            var handler: any LogHandler =
                switch format {
                case .json: JSONLogHandler(label: label)
                case .text: StreamLogHandler.standardError(label: label)
                }
            handler.logLevel = level
            return handler
        }
    }
}
