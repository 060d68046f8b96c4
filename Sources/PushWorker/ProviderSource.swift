import PushCore
import PushPluginAPI
import PushPlugins

/// What the enabled providers are configured from: the plugins' `PUSH_*` variables, `PUSH_PROVIDERS`, and
/// `PUSH_APPS_FILE` with the credential files it names. Start-up reads it through `WorkerConfiguration.load`;
/// live configuration (`LiveConfiguration`) reads it again the same way whenever one of those files changes.
public struct ProviderSource: Sendable {
    let environment: [String: String]
    let linked: [any ProviderPlugin]

    public init(environment: [String: String], linked: [any ProviderPlugin] = LinkedPlugins.all) {
        self.environment = environment
        self.linked = linked
    }

    /// The path of `PUSH_APPS_FILE`, if set.
    var appsFilePath: String? { SettingsReader(environment).string(CoreSettings.appsFile) }

    /// The enabled plugins, configured, each problem a line on `reader`; `aProviderWasRefused`: a plugin said why it cannot run.
    func configure(_ reader: inout SettingsReader) -> (enabled: [ConfiguredPlugin], aProviderWasRefused: Bool) {
        let sections = Set(linked.compactMap(\.appsFileSection))
        let appsFile = reader.string(CoreSettings.appsFile).map { AppsFile.load(path: $0, sections: sections, reader: &reader) } ?? [:]
        var configured: [ConfiguredPlugin] = []
        let problemsBeforePlugins = reader.problems.count
        for plugin in linked {
            if let ready = plugin.configure(&reader, apps: plugin.appsFileSection.flatMap { appsFile[$0] } ?? []) {
                configured.append(ready)
            }
        }
        let aProviderWasRefused = reader.problems.count > problemsBeforePlugins
        guard let list = reader.string(CoreSettings.providers) else { return (configured, aProviderWasRefused) }
        let names = list.split(separator: ",").map { ProviderID($0.trimmingCharacters(in: .whitespaces)) }.filter { !$0.rawValue.isEmpty }
        for name in names {
            if let plugin = linked.first(where: { $0.id == name }) {
                if !configured.contains(where: { $0.id == name }) {
                    reader.problem("PUSH_PROVIDERS enables \(name) but it is not configured: set \(plugin.configuredBy)")
                }
            } else {
                reader.problem("PUSH_PROVIDERS names \"\(name)\", which is not one of \(linked.map(\.id.rawValue).joined(separator: ", "))")
            }
        }
        return (configured.filter { names.contains($0.id) }, aProviderWasRefused)
    }

    /// The enabled plugins as a running worker may take them: every problem start-up would refuse, and a provider
    /// whose requests may take longer than the worker's attempt timeout (fixed at start-up, and the retry leases with it).
    func reconfigure(attemptTimeout: Duration) -> Result<[ConfiguredPlugin], ConfigurationErrors> {
        var reader = SettingsReader(environment)
        let (enabled, aProviderWasRefused) = configure(&reader)
        if enabled.isEmpty, !aProviderWasRefused {
            reader.problem("no provider is configured any more; set one of: " + linked.map(\.configuredBy).joined(separator: "; "))
        }
        for plugin in enabled where plugin.requestTimeout > attemptTimeout {
            reader.problem(
                "\(plugin.id) requests may take \(plugin.requestTimeout), longer than the attempt timeout of \(attemptTimeout) this worker started with; restart to enable it"
            )
        }
        guard reader.problems.isEmpty else { return .failure(ConfigurationErrors(problems: reader.problems)) }
        return .success(enabled)
    }
}
