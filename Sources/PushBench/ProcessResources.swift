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

    /// The CPU time of this process and of the whole machine at one instant.
    struct CPUSample {
        let at: ContinuousClock.Instant
        let processSeconds: Double
        /// All cores together, from the first line of /proc/stat: busy = user + nice + system + irq + softirq + steal.
        let machineBusySeconds: Double
        let machineIdleSeconds: Double

        static func now() -> CPUSample {
            let ticks = Double(max(sysconf(Int32(_SC_CLK_TCK)), 1))
            var busy = 0.0, idle = 0.0
            if let stat = try? String(contentsOfFile: "/proc/stat", encoding: .utf8), let line = stat.split(separator: "\n").first {
                let fields = line.split(separator: " ").dropFirst().compactMap { Double($0) }
                for (index, value) in fields.prefix(8).enumerated() {
                    if index == 3 || index == 4 { idle += value } else { busy += value }
                }
            }
            return CPUSample(at: .now, processSeconds: cpuSeconds(), machineBusySeconds: busy / ticks, machineIdleSeconds: idle / ticks)
        }

        /// Cores in use on average from `earlier` to this sample: by this process, by the machine, and how many it has.
        func cores(since earlier: CPUSample) -> (process: Double, machineBusy: Double, machine: Double) {
            let wall = (at - earlier.at).seconds
            guard wall > 0 else { return (0, 0, 0) }
            let busy = machineBusySeconds - earlier.machineBusySeconds
            let idle = machineIdleSeconds - earlier.machineIdleSeconds
            return ((processSeconds - earlier.processSeconds) / wall, busy / wall, (busy + idle) / wall)
        }
    }

    /// Peak resident set size (VmHWM) in bytes.
    static func peakResidentBytes() -> Int { statusField("VmHWM:") }

    /// Current resident set size (VmRSS) in bytes.
    static func residentBytes() -> Int { statusField("VmRSS:") }

    /// Returns freed heap to the kernel and restarts the VmHWM peak at the current RSS
    /// (`/proc/self/clear_refs`), so set-up (pre-filling Kafka) does not count as the run's peak.
    static func resetPeak() {
        // The release binary links jemalloc, whose freed pages stay resident until they decay
        // (10 s); glibc's malloc_trim would not touch them. "arena.4096.purge" is
        // MALLCTL_ARENAS_ALL: every arena returns its unused dirty pages now.
        if let symbol = dlsym(nil, "mallctl") {
            typealias Mallctl =
                @convention(c) (
                    UnsafePointer<CChar>?, UnsafeMutableRawPointer?, UnsafeMutablePointer<Int>?,
                    UnsafeMutableRawPointer?, Int
                ) -> Int32
            _ = unsafeBitCast(symbol, to: Mallctl.self)("arena.4096.purge", nil, nil, nil, 0)
        } else if let symbol = dlsym(nil, "malloc_trim") {
            typealias MallocTrim = @convention(c) (Int) -> Int32
            _ = unsafeBitCast(symbol, to: MallocTrim.self)(0)
        }
        try? "5".write(toFile: "/proc/self/clear_refs", atomically: false, encoding: .utf8)
    }

    /// Heap allocations made so far by every thread, when the allocator counts them (the release
    /// binary's jemalloc: small and large requests of all arenas); nil otherwise. Threads' caches
    /// report their counts to the arenas as they flush, so a count over a short span is approximate.
    static func allocations() -> UInt64? {
        guard let symbol = dlsym(nil, "mallctl") else { return nil }
        typealias Mallctl =
            @convention(c) (
                UnsafePointer<CChar>?, UnsafeMutableRawPointer?, UnsafeMutablePointer<Int>?,
                UnsafeMutableRawPointer?, Int
            ) -> Int32
        let mallctl = unsafeBitCast(symbol, to: Mallctl.self)
        // Writing "epoch" refreshes the statistics read below.
        var epoch: UInt64 = 1
        _ = withUnsafeMutableBytes(of: &epoch) { mallctl("epoch", nil, nil, $0.baseAddress, $0.count) }
        var total: UInt64 = 0
        for name in ["stats.arenas.4096.small.nrequests", "stats.arenas.4096.large.nrequests"] {
            var value: UInt64 = 0
            var size = MemoryLayout<UInt64>.size
            let status = withUnsafeMutableBytes(of: &value) { mallctl(name, $0.baseAddress, &size, nil, 0) }
            guard status == 0 else { return nil }
            total += value
        }
        return total
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
