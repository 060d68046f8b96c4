import Foundation
import PushCore
import Synchronization

/// Payload templates read from `PUSH_TEMPLATES_DIR`:
///
///     <dir>/<provider>/<app>/<kind>.mustache
///
/// `provider` is a provider whose plugin has templates (`TemplateShape`); `app` the bundle id or project id, or `default` for every
/// app without its own; `kind` a job kind (`call`, `message`, `cancel`, `custom`, `wake`) or
/// `default` for every kind without its own. Lookup: (app, kind), (app, default),
/// (default, kind), (default, default), else the plugin's built-in payload. Names starting
/// with `.` are skipped (Kubernetes ConfigMap volumes keep `..data` there).
///
/// `reload()` re-reads the files and swaps the set atomically: a changed file that no longer
/// compiles or renders keeps its last good version and is reported once; a removed file
/// goes back to the built-in payload.
public final class TemplateDirectory: PayloadTemplates, Sendable {
    public let path: String
    /// The providers with templates, by name.
    private let shapes: [ProviderID: any TemplateShape]
    /// `SOUND` for jobs without a notification sound, by kind (Mizu's `pushnotification_sound_call/chat/other`).
    private let defaultSounds: [JobKind: String]
    private let state = Mutex(State())

    struct State: Sendable {
        /// Last good template per file, with the text it was compiled from.
        var loaded: [String: (text: String, key: PayloadTemplateKey, template: PayloadTemplate)] = [:]
        /// Text of files reported broken, so each breakage is reported once.
        var reportedBroken: [String: String] = [:]
    }

    /// What a reload did.
    public struct Reload: Sendable, Equatable {
        /// Files (re)compiled or removed.
        public var changed: [String] = []
        /// One line per broken file: `<file>: <reason>`; each breakage appears once.
        public var problems: [String] = []
    }

    /// Loads every template; nil and one line per problem when any is broken (start-up refuses them).
    public static func load(
        path: String, shapes: [any TemplateShape],
        defaultSounds: [JobKind: String] = [:]
    ) -> Result<TemplateDirectory, ConfigurationProblems> {
        var isDirectory: ObjCBool = false
        guard FileManager.default.fileExists(atPath: path, isDirectory: &isDirectory), isDirectory.boolValue else {
            return .failure(ConfigurationProblems(lines: ["\(path) is not a directory"]))
        }
        let directory = TemplateDirectory(path: path, shapes: shapes, defaultSounds: defaultSounds)
        let first = directory.reload()
        guard first.problems.isEmpty else { return .failure(ConfigurationProblems(lines: first.problems)) }
        return .success(directory)
    }

    private init(path: String, shapes: [any TemplateShape], defaultSounds: [JobKind: String]) {
        self.path = path
        self.defaultSounds = defaultSounds
        self.shapes = Dictionary(shapes.map { ($0.provider, $0) }) { first, _ in first }
    }

    public struct ConfigurationProblems: Error, Sendable {
        public let lines: [String]
    }

    /// The keys that have a template file, for logs and `check-config`.
    public var sources: [String] { state.withLock { $0.loaded.keys.sorted() } }

    public func render(_ key: PayloadTemplateKey, keywords: @autoclosure () -> PayloadKeywords) -> Result<
        RenderedPayload, PayloadTemplateFailure
    >? {
        let candidates = [(key.app, key.kind.rawValue), (key.app, "default"), ("default", key.kind.rawValue), ("default", "default")]
        let template: PayloadTemplate? = state.withLock { state in
            for (app, kind) in candidates {
                if let found = state.loaded[Self.relativePath(key.provider, app, kind)] { return found.template }
            }
            return nil
        }
        guard let template else { return nil }
        var keywords = keywords()
        if keywords.values["SOUND", default: ""].isEmpty, let sound = defaultSounds[key.kind] { keywords.set("SOUND", sound) }
        return template.render(keywords)
    }

    static func relativePath(_ provider: ProviderID, _ app: String, _ kind: String) -> String {
        "\(provider.rawValue)/\(app)/\(kind).mustache"
    }

    /// Re-reads the directory; see the type's comment.
    @discardableResult
    public func reload() -> Reload {
        var report = Reload()
        var found: [String: (text: String, key: PayloadTemplateKey?)] = [:]
        let previous = state.withLock { $0 }
        var loaded: [String: (text: String, key: PayloadTemplateKey, template: PayloadTemplate)] = [:]
        var reportedBroken: [String: String] = [:]
        for (relative, problem) in scan(&found) {
            reportedBroken[relative] = problem
            if previous.reportedBroken[relative] != problem { report.problems.append("\(relative): \(problem)") }
        }
        for (relative, file) in found.sorted(by: { $0.key < $1.key }) {
            if let good = previous.loaded[relative], good.text == file.text {
                loaded[relative] = good
                continue
            }
            guard let key = file.key, let shape = shapes[key.provider] else { continue }
            do {
                let template = try PayloadTemplate(
                    text: file.text, shape: shape, app: key.app, kind: key.kind,
                    source: relative)
                loaded[relative] = (file.text, key, template)
                report.changed.append(relative)
            } catch {
                if let good = previous.loaded[relative] { loaded[relative] = good }
                reportedBroken[relative] = file.text
                if previous.reportedBroken[relative] != file.text { report.problems.append(error.description) }
            }
        }
        report.changed += previous.loaded.keys.filter { found[$0] == nil }.sorted()
        state.withLock { $0 = State(loaded: loaded, reportedBroken: reportedBroken) }
        return report
    }

    /// Files by relative path with their text and key; problems for names that do not fit the layout.
    private func scan(_ found: inout [String: (text: String, key: PayloadTemplateKey?)]) -> [(String, String)] {
        let files = FileManager.default
        var problems: [(String, String)] = []
        func visible(_ directory: String) -> [String] {
            ((try? files.contentsOfDirectory(atPath: directory)) ?? []).filter { !$0.hasPrefix(".") }.sorted()
        }
        for providerName in visible(path) {
            let provider = ProviderID(providerName)
            guard shapes[provider] != nil else {
                problems.append(
                    (providerName, "not a provider with templates (\(shapes.keys.sorted().map(\.rawValue).joined(separator: ", ")))"))
                continue
            }
            for app in visible("\(path)/\(providerName)") {
                for file in visible("\(path)/\(providerName)/\(app)") {
                    let relative = "\(providerName)/\(app)/\(file)"
                    let kindName = file.hasSuffix(".mustache") ? String(file.dropLast(".mustache".count)) : nil
                    guard let kindName, kindName == "default" || JobKind(rawValue: kindName) != nil else {
                        problems.append(
                            (
                                relative,
                                "name must be <kind>.mustache with kind one of \(JobKind.allCases.map(\.rawValue).joined(separator: ", ")) or default"
                            ))
                        continue
                    }
                    guard let text = try? String(contentsOfFile: "\(path)/\(relative)", encoding: .utf8) else {
                        problems.append((relative, "cannot be read as UTF-8 text"))
                        continue
                    }
                    // `default` kinds are checked with a call, the most demanding sample.
                    found[relative] = (text, PayloadTemplateKey(provider: provider, app: app, kind: JobKind(rawValue: kindName) ?? .call))
                }
            }
        }
        return problems
    }
}
