import PushCore

/// Any bytes: the job decoder returns a job or a rejection, never traps; a decoded job
/// respects the limits it was decoded under.
@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzJobDecoder(_ start: UnsafeRawPointer, _ count: Int) -> CInt {
    let bytes = Array(UnsafeRawBufferPointer(start: start, count: count))
    let decoder = JobDecoder()
    if let job = try? decoder.decode(bytes, fallbackCreatedAt: 1_795_310_000_000) {
        precondition(!job.targets.isEmpty && job.targets.count <= decoder.limits.maximumTargets)
        precondition(job.ttl >= 0 && job.ttl <= decoder.limits.maximumTTLSeconds)
    }
    return 0
}
