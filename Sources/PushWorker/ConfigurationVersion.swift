import Foundation
import PushCore
import PushCrypto
import PushHTTP
import PushPluginAPI

/// The content of everything a `ProviderSource` is read from, hashed: `PUSH_APPS_FILE`, every `…File` member of its
/// entries, and every file variable of the linked plugins (`Setting.Kind.file`, the single-app shortcuts such as
/// `PUSH_APNS_KEY_FILE`). Contents, not modification times or inodes, so a Kubernetes secret volume swapping its
/// `..data` link counts as soon as the new files are readable, and a rewrite with the same bytes does not.
struct ConfigurationVersion: Equatable, Sendable {
    /// SHA-256 over the apps file and every credential file, by path.
    let digest: [UInt8]
    /// Per plugin, SHA-256 over its section of the apps file and the files its entries and variables name: a plugin
    /// whose digest did not change keeps its provider across a reload.
    let plugins: [ProviderID: [UInt8]]

    /// The first 12 hex digits, for logs.
    var shortHex: String { String(Digest.hex(digest).prefix(12)) }

    /// The first 48 bits as a number, exact in a Prometheus sample (`push_config_version`).
    var gaugeValue: Double { Double(digest.prefix(6).reduce(UInt64(0)) { $0 << 8 | UInt64($1) }) }

    static func read(_ source: ProviderSource) -> ConfigurationVersion {
        let reader = SettingsReader(source.environment)
        var sections: [String: JSONValue] = [:]
        var whole = FileDigests()
        if let path = source.appsFilePath {
            let bytes = whole.add(path)
            if let bytes, case .object(let members)? = try? JSONParser.parse(bytes) {
                for (name, value) in members { sections[name] = value }
            }
        }
        var plugins: [ProviderID: [UInt8]] = [:]
        for plugin in source.linked {
            var own = FileDigests()
            for setting in plugin.settings where setting.kind == .file {
                if let path = reader.string(setting.name) { own.record(setting.name, path: path, into: &whole) }
            }
            if let name = plugin.appsFileSection, let section = sections[name] {
                var writer = JSONWriter()
                writer.value(section)
                own.bytes += Digest.sha256(writer.bytes)
                if case .array(let entries) = section {
                    for entry in entries {
                        guard case .object(let members) = entry else { continue }
                        for (member, value) in members where member.hasSuffix("File") {
                            if case .string(let path) = value, !path.isEmpty { own.record(member, path: path, into: &whole) }
                        }
                    }
                }
            }
            plugins[plugin.id] = Digest.sha256(own.bytes)
        }
        return ConfigurationVersion(digest: Digest.sha256(whole.bytes), plugins: plugins)
    }

    /// The providers whose digest differs between two versions (added, removed or changed).
    func changedProviders(since previous: ConfigurationVersion) -> Set<ProviderID> {
        Set(plugins.keys).union(previous.plugins.keys).filter { plugins[$0] != previous.plugins[$0] }
    }
}

/// Bytes to hash: per file its name, path and content digest (or a mark for a file that cannot be read).
private struct FileDigests {
    var bytes: [UInt8] = []

    /// Adds the file at `path`, returning its bytes.
    @discardableResult
    mutating func add(_ path: String, as name: String = "") -> [UInt8]? {
        let content = FileManager.default.contents(atPath: path).map { Array($0) }
        bytes += Array("\(name)\u{0}\(path)\u{0}".utf8)
        bytes += content.map { Digest.sha256($0) } ?? Array("unreadable".utf8)
        return content
    }

    /// Adds the credential file at `path` here and to `whole`, read as the plugins read TLS files (`CredentialFile`: a
    /// regular file, opened without blocking, at most 1 MiB), so a FIFO named by a new version cannot hang the check.
    mutating func record(_ name: String, path: String, into whole: inout FileDigests) {
        let file = CredentialFile(reading: path)
        let before = bytes.count
        bytes += Array("\(name)\u{0}\(path)\u{0}".utf8)
        bytes += file.problem == nil ? file.sha256 : Array("refused: \(file.problem.map { "\($0)" } ?? "")".utf8)
        whole.bytes += bytes[before...]
    }
}
