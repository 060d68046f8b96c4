import Foundation
import PushCore
import PushPluginAPI

/// `PUSH_APPS_FILE`: several apps per provider, each with its own credentials (files, typically
/// mounted Kubernetes secrets). A JSON object with one array per provider, each read by its plugin
/// (`ProviderPlugin.appsFileSection`):
///
///     {"apns": [{"bundleId": "com.example.chat", "keyFile": "/secrets/AuthKey_KEYID4APNS.p8", …}],
///      "fcm": [{"credentialsFile": "/secrets/fcm/example-project.json"}]}
enum AppsFile {
    /// The file's sections, by name; one problem line per unreadable file or unknown section.
    static func load(path: String, sections known: Set<String>, reader: inout SettingsReader) -> [String: [JSONValue]] {
        guard let data = FileManager.default.contents(atPath: path) else {
            reader.problem("PUSH_APPS_FILE points to \(path), which does not exist or is not readable")
            return [:]
        }
        guard let document = try? JSONParser.parse(Array(data)), case .object(let members) = document else {
            reader.problem("PUSH_APPS_FILE \(path) is not a JSON object")
            return [:]
        }
        var sections: [String: [JSONValue]] = [:]
        for (section, value) in members {
            guard known.contains(section) else {
                reader.problem(
                    "PUSH_APPS_FILE: section \"\(section)\" is not supported (supported: \(known.sorted().joined(separator: ", ")))")
                continue
            }
            guard case .array(let entries) = value else {
                reader.problem("PUSH_APPS_FILE: \(section) must be an array")
                continue
            }
            sections[section] = entries
        }
        return sections
    }
}
