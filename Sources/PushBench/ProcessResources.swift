import Foundation

/// CPU time and resident memory of this process, from the kernel.
enum ProcessResources {
    /// User + system CPU seconds consumed so far by every thread.
    static func cpuSeconds() -> Double {
        var usage = rusage()
        getrusage(__rusage_who_t(RUSAGE_SELF.rawValue), &usage)
        func seconds(_ time: timeval) -> Double { Double(time.tv_sec) + Double(time.tv_usec) / 1e6 }
        return seconds(usage.ru_utime) + seconds(usage.ru_stime)
    }

    /// Peak resident set size (VmHWM) in bytes.
    static func peakResidentBytes() -> Int { statusField("VmHWM:") }

    /// Current resident set size (VmRSS) in bytes.
    static func residentBytes() -> Int { statusField("VmRSS:") }

    /// Returns freed heap to the kernel and restarts the VmHWM peak at the current RSS
    /// (`/proc/self/clear_refs`), so set-up (pre-filling Kafka) does not count as the run's peak.
    static func resetPeak() {
        if let symbol = dlsym(nil, "malloc_trim") {
            typealias MallocTrim = @convention(c) (Int) -> Int32
            _ = unsafeBitCast(symbol, to: MallocTrim.self)(0)
        }
        try? "5".write(toFile: "/proc/self/clear_refs", atomically: false, encoding: .utf8)
    }

    private static func statusField(_ name: String) -> Int {
        guard let status = try? String(contentsOfFile: "/proc/self/status", encoding: .utf8) else { return 0 }
        for line in status.split(separator: "\n") where line.hasPrefix(name) {
            let number = line.dropFirst(name.count).split(whereSeparator: { $0 == " " || $0 == "\t" }).first.flatMap { Int($0) } ?? 0
            return number * 1024
        }
        return 0
    }
}
