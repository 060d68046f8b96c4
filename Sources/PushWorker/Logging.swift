import Foundation
import Logging
import PushCore

public enum LogFormat: String, Sendable {
    case json, text
}

/// One JSON object per line on stderr: `ts`, `level`, `label`, `msg`, then the metadata.
public struct JSONLogHandler: LogHandler {
    public var logLevel: Logger.Level = .info
    public var metadata: Logger.Metadata = [:]
    private let label: String

    public init(label: String) { self.label = label }

    public subscript(metadataKey key: String) -> Logger.Metadata.Value? {
        get { metadata[key] }
        set { metadata[key] = newValue }
    }

    public func log(event: LogEvent) {
        let level = event.level
        let message = event.message
        let explicit = event.metadata
        var writer = JSONWriter(capacity: 256)
        writer.beginObject()
        writer.member("ts", ISO8601DateFormatter.string(from: Date(), timeZone: .gmt,
                                                         formatOptions: [.withInternetDateTime, .withFractionalSeconds]))
        writer.member("level", level.rawValue)
        writer.member("label", label)
        writer.member("msg", message.description)
        let merged = metadata.merging(explicit ?? [:]) { $1 }
        for (key, value) in merged.sorted(by: { $0.key < $1.key }) { writer.member(key, "\(value)") }
        writer.endObject()
        var bytes = writer.bytes
        bytes.append(0x0A)
        bytes.withUnsafeBytes { buffer in
            var written = 0
            while written < buffer.count {
                let result = Foundation.write(STDERR_FILENO, buffer.baseAddress! + written, buffer.count - written)
                if result <= 0 { break }
                written += result
            }
        }
    }
}

public enum LogSetup {
    /// Installs the process-wide log handler once.
    public static func bootstrap(format: LogFormat, level: Logger.Level) {
        LoggingSystem.bootstrap { label in
            var handler: any LogHandler = switch format {
            case .json: JSONLogHandler(label: label)
            case .text: StreamLogHandler.standardError(label: label)
            }
            handler.logLevel = level
            return handler
        }
    }
}
