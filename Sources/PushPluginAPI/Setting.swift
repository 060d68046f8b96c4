import Foundation

/// One `PUSH_*` variable, declared once: its name, type, default, range and help. The reader takes the
/// default and range from here, and the configuration reference (`push-worker run --help`,
/// docs/configuration.md) is generated from the declarations.
public struct Setting: Sendable {
    public enum Kind: Sendable, Equatable {
        case text
        case integer(ClosedRange<Int>)
        case boolean
        /// A path to a readable file.
        case file
        /// Comma-separated values.
        case list
    }

    public let name: String
    public let kind: Kind
    /// The default as the reference shows it; nil: none (unset means off or required).
    public let defaultValue: String?
    public let help: String

    /// A text setting.
    public init(_ name: String, default defaultValue: String? = nil, _ help: String) {
        self.init(name, .text, default: defaultValue, help)
    }

    public init(_ name: String, _ kind: Kind, default defaultValue: String? = nil, _ help: String) {
        self.name = name
        self.kind = kind
        self.defaultValue = defaultValue
        self.help = help
    }
}

/// Reads variables and collects one problem line per bad value.
public struct SettingsReader {
    private let environment: [String: String]
    public private(set) var problems: [String] = []

    public init(_ environment: [String: String]) { self.environment = environment }

    public mutating func problem(_ line: String) { problems.append(line) }

    public func string(_ name: String) -> String? {
        guard let value = environment[name]?.trimmingCharacters(in: .whitespaces), !value.isEmpty else { return nil }
        return value
    }

    public func string(_ setting: Setting) -> String? { string(setting.name) ?? setting.defaultValue }

    public func isSet(_ setting: Setting) -> Bool { string(setting.name) != nil }

    public mutating func integer(_ name: String, default defaultValue: Int, in range: ClosedRange<Int>) -> Int {
        guard let text = string(name) else { return defaultValue }
        guard let value = Int(text), range.contains(value) else {
            problem("\(name) must be an integer in \(range.lowerBound)...\(range.upperBound), got \"\(text)\"")
            return defaultValue
        }
        return value
    }

    /// An `.integer` setting: its value, or its default.
    public mutating func integer(_ setting: Setting) -> Int {
        guard case .integer(let range) = setting.kind, let fallback = setting.defaultValue.flatMap({ Int($0) }) else {
            preconditionFailure("\(setting.name) is not declared as an integer with a default")
        }
        return integer(setting.name, default: fallback, in: range)
    }

    public mutating func boolean(_ name: String, default defaultValue: Bool) -> Bool {
        guard let text = string(name) else { return defaultValue }
        switch text.lowercased() {
        case "true", "1", "yes": return true
        case "false", "0", "no": return false
        default:
            problem("\(name) must be true or false, got \"\(text)\"")
            return defaultValue
        }
    }

    public mutating func boolean(_ setting: Setting) -> Bool {
        boolean(setting.name, default: setting.defaultValue == "true")
    }

    public mutating func readableFile(_ name: String) -> String? {
        guard let path = string(name) else { return nil }
        guard FileManager.default.isReadableFile(atPath: path) else {
            problem("\(name) points to \(path), which does not exist or is not readable")
            return nil
        }
        return path
    }

    public mutating func readableFile(_ setting: Setting) -> String? { readableFile(setting.name) }

    /// A `.list` setting's entries, trimmed, empty ones dropped.
    public func list(_ setting: Setting) -> [String] {
        (string(setting) ?? "").split(separator: ",").map { $0.trimmingCharacters(in: .whitespaces) }.filter { !$0.isEmpty }
    }

    /// An https URL setting (a base URL loses its trailing slash); a problem for anything else.
    public mutating func httpsURL(_ setting: Setting, isBase: Bool = true) -> String? {
        guard let text = string(setting) else { return nil }
        guard let url = URL(string: text), url.scheme == "https", url.host != nil else {
            problem("\(setting.name) must be an https:// URL, got \"\(text)\"")
            return nil
        }
        return isBase && text.hasSuffix("/") ? String(text.dropLast()) : text
    }

    /// Problems for settings given although what they depend on is not (`PUSH_X_CA_FILE is set but …`).
    public mutating func refuseDependents(_ settings: [Setting], because missing: String) {
        for setting in settings where string(setting.name) != nil {
            problem("\(setting.name) is set but \(missing)")
        }
    }
}
