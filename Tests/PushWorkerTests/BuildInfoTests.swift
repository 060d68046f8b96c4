import Foundation
import PushBuildInfo
import PushWorker
import Testing
import TestSupport

@Suite("Build info: one version everywhere an operator reads it")
struct BuildInfoTests {
    static let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().appendingPathComponent("../..").standardized

    static func file(_ path: String) throws -> String {
        try String(contentsOf: root.appendingPathComponent(path), encoding: .utf8)
    }

    @Test("the binary's version is the VERSION file's, a semantic version")
    func versionIsTheFile() throws {
        let file = try Self.file("VERSION").trimmingCharacters(in: .whitespacesAndNewlines)
        #expect(BuildInfo.version == file)
        #expect(BuildInfo.version.wholeMatch(of: /(0|[1-9][0-9]*)\.(0|[1-9][0-9]*)\.(0|[1-9][0-9]*)(-[0-9A-Za-z.-]+)?/) != nil)
    }

    @Test("the revision is the git commit (12 hex digits, -dirty with uncommitted changes) or unknown")
    func revisionShape() {
        #expect(BuildInfo.revision == "unknown" || BuildInfo.revision.wholeMatch(of: /[0-9a-f]{12}(-dirty)?/) != nil)
    }

    @Test("the chart's appVersion and the changelog's newest release are the binary's version")
    func chartAndChangelogAgree() throws {
        let chart = try Self.file("charts/push-worker/Chart.yaml")
        let appVersion = chart.split(separator: "\n").first { $0.hasPrefix("appVersion:") }?
            .dropFirst("appVersion:".count).trimmingCharacters(in: CharacterSet(charactersIn: " \"'"))
        #expect(appVersion == BuildInfo.version)
        let changelog = try Self.file("CHANGELOG.md")
        let newest = changelog.firstMatch(of: /\n## \[(\d+\.\d+\.\d+[^\]]*)\]/)?.output.1
        #expect(newest.map(String.init) == BuildInfo.version)
    }

    @Test("push_build_info is 1 with the version and revision as labels")
    func gauge() {
        _ = TestMetrics.registry
        BuildInfo.recordGauge()
        #expect(
            TestMetrics.value(of: "push_build_info{version=\"\(BuildInfo.version)\",revision=\"\(BuildInfo.revision)\"}") == 1)
    }
}
