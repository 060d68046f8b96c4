import Foundation
import PushCore
import Testing

/// A provider's conformance table, `docs/providers/<provider>.md`, read so that the tests run the
/// table itself: every answer row (`| FCM-A03 | … |`) is a test case whose expected outcome, action,
/// retry and circuit are the row's cells, and every request row (`| FCM-Q03 | … |`) names the tests
/// that pin it.
public struct ConformanceTable: Sendable {
    /// One row: its id and its cells after the id, trimmed, backticks kept.
    public struct Row: Sendable, CustomStringConvertible {
        public let id: String
        public let cells: [String]

        public var description: String { id }
    }

    public let answers: [Row]
    public let requests: [Row]

    public static func directory() -> URL {
        URL(fileURLWithPath: #filePath).deletingLastPathComponent().appendingPathComponent("../../docs/providers").standardized
    }

    /// Reads `docs/providers/<file>.md`; rows whose id is `<prefix>-A…` are answers, `<prefix>-Q…` requests.
    public static func load(_ file: String, prefix: String) throws -> ConformanceTable {
        let text = try String(contentsOf: directory().appendingPathComponent("\(file).md"), encoding: .utf8)
        var answers: [Row] = []
        var requests: [Row] = []
        for line in text.split(separator: "\n") where line.hasPrefix("| \(prefix)-") {
            let cells = line.split(separator: "|", omittingEmptySubsequences: false).dropFirst().dropLast()
                .map { $0.trimmingCharacters(in: .whitespaces) }
            guard let id = cells.first else { continue }
            let row = Row(id: id, cells: Array(cells.dropFirst()))
            if id.hasPrefix("\(prefix)-A") { answers.append(row) } else if id.hasPrefix("\(prefix)-Q") { requests.append(row) }
        }
        return ConformanceTable(answers: answers, requests: requests)
    }

    /// The answer rows of `file`, for `@Test(arguments:)`; empty (and so failing the row-count checks) when unreadable.
    public static func answerRows(_ file: String, prefix: String) -> [Row] {
        (try? load(file, prefix: prefix).answers) ?? []
    }

    /// The test names in backticks of a request row's last cell.
    public static func testNames(of row: Row) -> [String] {
        guard let cell = row.cells.last else { return [] }
        return cell.split(separator: "`", omittingEmptySubsequences: false).enumerated()
            .filter { $0.offset % 2 == 1 }.map { String($0.element) }
    }

    /// Whether a test with this display name is declared in `Tests/<target>/`.
    public static func testExists(named name: String, in target: String) -> Bool {
        let folder = URL(fileURLWithPath: #filePath).deletingLastPathComponent().appendingPathComponent("../\(target)").standardized
        let files = (try? FileManager.default.contentsOfDirectory(atPath: folder.path)) ?? []
        return files.filter { $0.hasSuffix(".swift") }.contains { file in
            let source = (try? String(contentsOf: folder.appendingPathComponent(file), encoding: .utf8)) ?? ""
            // swift format may put a long test's name on the line after `@Test(`.
            let declarations = source.replacingOccurrences(of: #"@Test\(\s+"#, with: "@Test(", options: .regularExpression)
            return declarations.contains("@Test(\"\(name)\"")
        }
    }

    /// The cells a classified result gives, in the table's order: outcome status, action, retry, circuit.
    /// `scopeName` names the provider's scope ("(app, environment)"), `partName` its part ("(project, platform)").
    public static func cells(
        of result: DeliveryResult, scopeName: String,
        partName: String? = nil
    ) -> [String] {
        let target = Target(bindingId: "b", provider: "any")
        let job = Job(id: "j", createdAt: 0, ttl: 60, kind: .message, priority: .high, userId: "u", targets: [target])
        let outcome = Outcome(job: job, target: target, result: result, attempts: 1, at: 0)
        let retry: String
        let circuit: String
        switch result {
        case .retryable(_, _, let after?):
            retry = "yes, after \(after.components.seconds) s"
            circuit = "storm \(scopeName)"
        case .retryable:
            retry = "yes"
            circuit = "storm \(scopeName)"
        case .failed(_, _, .checkCredentials, let blame):
            retry = "no"
            switch blame {
            case .scope: circuit = "opens \(scopeName)"
            case .part: circuit = "opens \(partName ?? scopeName)"
            case .request: circuit = "none"
            }
        default:
            retry = "no"
            circuit = "none"
        }
        return [outcome.status.rawValue, outcome.action.rawValue, retry, circuit]
    }

    /// Expects every answer row of the table to have a test case in `tested` and every test case to have a row.
    public static func expectAnswerRowsComplete(_ provider: String, prefix: String, tested: Set<String>) throws {
        let table = try load(provider, prefix: prefix)
        #expect(Set(table.answers.map(\.id)) == tested)
    }

    /// Expects at least `minimum` request rows, each naming tests that exist in the test target `testTarget`.
    public static func expectRequestRowsNameTheirTests(_ provider: String, prefix: String, testTarget: String, atLeast minimum: Int) throws
    {
        let table = try load(provider, prefix: prefix)
        #expect(table.requests.count >= minimum)
        for row in table.requests {
            let names = testNames(of: row)
            #expect(!names.isEmpty, "\(row.id) names no test")
            for name in names { #expect(testExists(named: name, in: testTarget), "\(row.id): no test named \(name)") }
        }
    }
}
