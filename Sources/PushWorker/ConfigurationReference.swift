import PushPluginAPI
import PushPlugins

/// Every `PUSH_*` variable the worker reads: the single source for `--help`, the table in
/// docs/configuration.md and the unknown-variable check. Each plugin declares its own (`ProviderPlugin.settings`).
public struct EnvironmentVariable: Sendable {
    public let name: String
    public let defaultValue: String?
    public let meaning: String

    init(_ name: String, _ defaultValue: String?, _ meaning: String) {
        self.name = name
        self.defaultValue = defaultValue
        self.meaning = meaning
    }

    init(_ setting: Setting) {
        self.init(setting.name, setting.defaultValue, setting.help)
    }
}

public enum ConfigurationReference {
    public static let rdkafkaPrefix = "PUSH_RDKAFKA_"

    /// The `PUSH_RDKAFKA_*` variable that sets a librdkafka property.
    public static func rdkafkaVariable(for property: String) -> String {
        rdkafkaPrefix + property.uppercased().replacingOccurrences(of: ".", with: "_")
    }

    /// Every variable of a worker linking `plugins`: the core's, then each plugin's, in its declared order.
    public static func variables(plugins: [any ProviderPlugin] = LinkedPlugins.all) -> [EnvironmentVariable] {
        (CoreSettings.opening + plugins.flatMap(\.settings) + CoreSettings.closing).map(EnvironmentVariable.init)
    }

    /// The reference as a Markdown table (docs/configuration.md) or aligned text (`--help`).
    public static func render(markdown: Bool, plugins: [any ProviderPlugin] = LinkedPlugins.all) -> String {
        let variables = variables(plugins: plugins)
        if markdown {
            var lines = ["| variable | default | meaning |", "| --- | --- | --- |"]
            for variable in variables {
                lines.append("| `\(variable.name)` | \(variable.defaultValue.map { "`\($0)`" } ?? "—") | \(variable.meaning) |")
            }
            return lines.joined(separator: "\n")
        }
        return variables.map { variable in
            let defaultText = variable.defaultValue.map { " (default: \($0))" } ?? ""
            return "  \(variable.name)\(defaultText)\n      \(variable.meaning.replacingOccurrences(of: "`", with: ""))"
        }.joined(separator: "\n")
    }
}
