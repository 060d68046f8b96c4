import Foundation

/// The two-column text tables the bench's reports print, and the figures they share.
enum ReportTable {
    static func number(_ value: Double, _ digits: Int = 1) -> String { String(format: "%.\(digits)f", value) }

    /// `delivered 3, failed 1`, by status name.
    static func outcomes(_ counts: [String: Int]) -> String {
        counts.sorted { $0.key < $1.key }.map { "\($0.key) \($0.value)" }.joined(separator: ", ")
    }

    static func latency(_ value: EndToEndReport.Latency) -> String {
        "p50 \(number(value.p50)) · p90 \(number(value.p90)) · p99 \(number(value.p99)) · max \(number(value.max)) ms"
    }

    /// Names padded to the longest, two spaces, the value.
    static func render(_ rows: [(String, String)]) -> String {
        let width = rows.map(\.0.count).max() ?? 0
        return rows.map { $0.0.padding(toLength: width, withPad: " ", startingAt: 0) + "  " + $0.1 }.joined(separator: "\n")
    }
}

/// How fast queued jobs drained: from the first consumed to the last acknowledged.
struct DrainRate {
    let seconds: Double
    let jobsPerSecond: Double

    init(first: ContinuousClock.Instant?, last: ContinuousClock.Instant?, finished: Int) {
        if let first, let last { seconds = (last - first).seconds } else { seconds = 0 }
        jobsPerSecond = seconds > 0 ? Double(finished) / seconds : 0
    }
}
